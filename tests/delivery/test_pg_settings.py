"""The bounds every PostgreSQL connection of the journal and the store carries (spec delivery §3.6-c, scaleout §1.4-c).

[D3.6-c] [P1.4-c]. Pure: the conninfo is built and read back, no database is needed
(``tests/faults/test_pg_stall.py`` stops a real one).
"""

from __future__ import annotations

from psycopg.conninfo import conninfo_to_dict

from envelope.delivery.postgres import connection_settings, settings_for


def test_spec_delivery_3_6_c_connections_carry_every_timeout() -> None:
    """[D3.6-c]: connect, statement, keepalive and TCP user timeouts; a URL's own options are kept first."""
    url = "postgresql://agent@db.internal:6543/agents?options=-csearch_path%3Ds1"
    info = conninfo_to_dict(settings_for(url, connection_settings()))
    assert info["connect_timeout"] == "3"
    assert info["keepalives"] == "1"
    assert (info["keepalives_idle"], info["keepalives_interval"], info["keepalives_count"]) == ("5", "2", "3")
    assert info["tcp_user_timeout"] == "10000"
    assert info["options"] == "-csearch_path=s1 -c statement_timeout=5000"
    assert (info["host"], info["port"], info["dbname"]) == ("db.internal", "6543", "agents")
    lifted = conninfo_to_dict(
        settings_for("postgresql://h/d", connection_settings(statement_timeout=None, tcp_user_timeout=None))
    )
    assert "options" not in lifted
    assert "tcp_user_timeout" not in lifted
    assert lifted["connect_timeout"] == "3"
    assert (
        conninfo_to_dict(settings_for("postgresql://h/d", connection_settings(connect_timeout=0.5)))["connect_timeout"]
        == "2"
    )  # libpq's floor
