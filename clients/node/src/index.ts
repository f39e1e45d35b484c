/**
 * convo: a TypeScript client for the convo sidecar. `ConvoClient.start()` spawns the
 * binary and returns a client with a typed method per protocol method, and `subscribe()`
 * for the changes other processes on the same store make.
 */
export { ConvoClient, CLIENT_METHODS, type ConvoOptions, type CallOptions, type InitializeParams } from "./client.js";
export type { Exit, Logger } from "./child.js";
export type { Subscription, SessionChange, SubscribeOptions } from "./subscription.js";
export * from "./errors.js";
export {
  resolveBinary,
  currentTarget,
  detectLibc,
  packageName,
  binaryPath,
  TARGETS,
  type Target,
  type Libc,
  type LibcProbes,
  type LookupOptions,
} from "./binary.js";
export type {
  Runtime,
  RunHandler,
  StreamHandler,
  StreamChunk,
  RuntimeRequest,
  RuntimeStreamRequest,
  RuntimeAnswer,
  RuntimeTextAnswer,
  RuntimeResponseAnswer,
  RuntimeContext,
} from "./runtime.js";
export type {
  ProviderResponses,
  ProviderResponse,
  AddResponseParams,
  Interaction,
  InteractionStep,
  InteractionContent,
  InteractionUsage,
  BuiltInToolStep,
} from "./responses.js";
export * from "./protocol.js";
