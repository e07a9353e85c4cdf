// The package's entry: the decoder (envelope-decoder.mjs) and the client (envelope-client.mjs).
export * from "./envelope-decoder.mjs";
export { HTTPError, ResumeError, Run, connect, parseEventId } from "./envelope-client.mjs";
