// Types of the package's entry (index.mjs): the decoder and the client.
export * from "./envelope-decoder.mjs";
export { HTTPError, ResumeError, Run, connect, parseEventId } from "./envelope-client.mjs";
export type {
  Backoff,
  ConnectOptions,
  HeadersSource,
  PendingCall,
  ReconnectInfo,
  RunEvent,
  StopAnswer,
  ToolResult,
} from "./envelope-client.mjs";
