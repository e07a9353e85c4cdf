"""`agent-ref serve --model` with no value means the same Claude model as `agent-ref run --model`."""

from __future__ import annotations

import argparse

from agent_ref.cli.serve import add_serve_command
from agent_ref.models import core as models


def test_serve_model_flag_defaults_to_the_run_commands_claude_model() -> None:
    parser = argparse.ArgumentParser()
    add_serve_command(parser.add_subparsers(dest="command"))
    assert parser.parse_args(["serve", "--model"]).model == models.DEFAULT_CLAUDE_MODEL
    assert parser.parse_args(["serve"]).model is None
