/**
 * The host runtime: convo owns the conversation, the host owns the model. For
 * `session/run`, `json` and `stream` convo asks the host over the same connection with the
 * server → client requests `runtime/run` and `runtime/stream`; this module answers them
 * with the `runtime` option's functions, and turns a stream handler's chunks into
 * `runtime/delta` notifications.
 */
import { ResponseError, type CancellationToken, type MessageConnection } from "vscode-jsonrpc/node";
import type { Format, Message, ToolCall } from "./protocol.js";
import type { ProviderResponse } from "./responses.js";

/** What convo asks the host in `runtime/run` (protocol/README.md, "Server → client requests"). */
export interface RuntimeRequest {
  session_id: string;
  /** `"run"` for session/run and session/stream, `"json"` for session/json. */
  purpose: "run" | "json" | "summarize" | (string & {});
  system: string | null;
  /** The repaired history, then the new user message. */
  messages: Message[];
  /** As given to session/run (0 stays 0); null when not given. */
  temperature: unknown;
  max_tokens: unknown;
  tools: unknown;
  metadata: Record<string, unknown> | null;
  /** The provider-ready request body of `messages`, when the runtime declared a `format`. */
  payload?: Record<string, unknown>;
  /** purpose json: `{type: "json_schema", schema}`. */
  response_format?: { type: "json_schema"; schema: Record<string, unknown> };
  [member: string]: unknown;
}

/** What convo asks the host in `runtime/stream`. */
export interface RuntimeStreamRequest extends RuntimeRequest {
  stream_id: string;
}

/** The host's answer in convo's terms; convo stores `text` and `tool_calls`, and `usage`,
 * `model` and `stop_reason` in the assistant message's metadata. */
export interface RuntimeTextAnswer {
  text?: string | null;
  tool_calls?: ToolCall[] | null;
  /** Any object (a provider SDK's usage as it is). */
  usage?: object;
  model?: string;
  stop_reason?: string;
  /** Not with `text`: a `{format, response}` answer is a `RuntimeResponseAnswer`. */
  format?: undefined;
  response?: undefined;
  [member: string]: unknown;
}

/** The host's answer as the provider's whole response object, `{format, response}`:
 * stored as `addResponse` stores it (`native`, normalised `usage`, `metadata`
 * `{response_id, stop_reason}`). One the server would refuse fails the call with 1008
 * `invalid_response`. `format` and `response` are paired: `{format: "anthropic_messages",
 * response}` needs an Anthropic message. */
export type RuntimeResponseAnswer = { [F in Format]: ProviderResponse<F> }[Format];

/** What a runtime handler answers: text and tool calls, or a provider's whole response. */
export type RuntimeAnswer = RuntimeTextAnswer | RuntimeResponseAnswer;

/** A piece of a streamed answer: text, or a `runtime/delta`'s members. */
export type StreamChunk = string | { text?: string; tool_calls?: ToolCall[] };

export interface RuntimeContext {
  /** Aborted when convo stops waiting (its timeout, or the caller cancelled the run) or the
   * client is disposed. */
  signal: AbortSignal;
}

/** Answers `runtime/run`. Throwing fails the run with 1008 (`reason: "error"`). */
export type RunHandler = (request: RuntimeRequest, context: RuntimeContext) => RuntimeAnswer | Promise<RuntimeAnswer>;

/**
 * Answers `runtime/stream`: each chunk yielded is sent as a `runtime/delta`; the final
 * answer (what convo stores) is the generator's return value (`{format, response}` with
 * the SDK's assembled response, say), or, when it returns nothing, `{text}` with the
 * yielded text joined.
 */
export type StreamHandler = (
  request: RuntimeStreamRequest,
  context: RuntimeContext,
) => AsyncIterable<StreamChunk> | AsyncGenerator<StreamChunk, RuntimeAnswer | void, undefined>;

/** The `runtime` option: a function answering `runtime/run`, or handlers for both requests. */
export type Runtime =
  | RunHandler
  | {
      /** Answers `runtime/run`; when absent, `stream` answers it and its chunks are joined. */
      run?: RunHandler;
      /** Answers `runtime/stream`; when absent, `run` answers it as one chunk. */
      stream?: StreamHandler;
      /** Asks convo to add `payload`, the provider-ready request body, to every request. */
      format?: Format;
    };

/** The signal of a server → client request: aborted by its `$/cancelRequest` or `closed`. */
function contextOf(token: CancellationToken, closed: AbortSignal): { context: RuntimeContext; done(): void } {
  const controller = new AbortController();
  const abort = () => controller.abort(new Error("convo no longer waits for this answer"));
  const sub = token.onCancellationRequested(abort);
  if (token.isCancellationRequested) abort();
  closed.addEventListener("abort", abort);
  return {
    context: { signal: controller.signal },
    done() {
      sub.dispose();
      closed.removeEventListener("abort", abort);
    },
  };
}

/** A handler's failure as the error reply convo stores in `data.error`. */
function replyError(e: unknown): ResponseError<unknown> {
  if (e instanceof ResponseError) return e;
  const err = e instanceof Error ? e : new Error(String(e));
  return new ResponseError(-32000, err.message || err.name, { name: err.name });
}

async function runStream(
  handler: StreamHandler,
  request: RuntimeStreamRequest,
  context: RuntimeContext,
  send: (delta: { stream_id: string; text?: string; tool_calls?: ToolCall[] }) => Promise<void>,
): Promise<RuntimeAnswer> {
  const iterator = handler(request, context)[Symbol.asyncIterator]() as AsyncIterator<StreamChunk, RuntimeAnswer | void>;
  let text = "";
  try {
    for (;;) {
      const step = await iterator.next();
      if (step.done) return step.value ?? { text };
      if (context.signal.aborted) throw context.signal.reason;
      const delta = typeof step.value === "string" ? { text: step.value } : step.value;
      if (delta.text) text += delta.text;
      await send({ stream_id: request.stream_id, ...delta });
    }
  } finally {
    if (context.signal.aborted) await iterator.return?.();
  }
}

/** Joins a stream handler's chunks into one answer, for `runtime/run`. */
async function collect(handler: StreamHandler, request: RuntimeRequest, context: RuntimeContext): Promise<RuntimeAnswer> {
  return runStream(handler, { ...request, stream_id: "" }, context, async () => {});
}

/**
 * Registers the handlers of `runtime` on the connection. Without a runtime nothing is
 * registered and vscode-jsonrpc answers -32601, which convo reports as 1008 `no_runtime`.
 */
export function serveRuntime(
  connection: MessageConnection,
  runtime: Runtime | undefined,
  closed: AbortSignal,
  busy: (delta: 1 | -1) => void,
): void {
  if (!runtime) return;
  const { run, stream } = typeof runtime === "function" ? { run: runtime, stream: undefined } : runtime;
  const serve = <P>(answer: (params: P, context: RuntimeContext) => Promise<RuntimeAnswer>) => {
    return async (params: P, token: CancellationToken) => {
      const { context, done } = contextOf(token, closed);
      busy(1);
      try {
        return await answer(params, context);
      } catch (e) {
        throw replyError(e);
      } finally {
        done();
        busy(-1);
      }
    };
  };
  connection.onRequest(
    "runtime/run",
    serve<RuntimeRequest>(async (params, context) => (run ? run(params, context) : collect(stream!, params, context))),
  );
  connection.onRequest(
    "runtime/stream",
    serve<RuntimeStreamRequest>(async (params, context) => {
      if (stream) return runStream(stream, params, context, (d) => connection.sendNotification("runtime/delta", d));
      const answer = await run!(params, context);
      // A `{format, response}` answer has no text of its own: the stored message shows it.
      if (answer.format === undefined && answer.text) {
        await connection.sendNotification("runtime/delta", { stream_id: params.stream_id, text: answer.text });
      }
      return answer;
    }),
  );
}
