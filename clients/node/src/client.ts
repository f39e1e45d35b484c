/**
 * `ConvoClient`: one convo process and the JSON-RPC connection over its stdio (LSP
 * framing, vscode-jsonrpc). A typed method per protocol method (`CLIENT_METHODS` maps
 * each one of protocol/openrpc.json to its client method; a test fails when they drift),
 * cancellation through `AbortSignal`, the host runtime, `subscribe()` (the
 * `session/changed` notifications of a subscription as an async iterator), and an
 * orderly end in `dispose()`.
 */
import "./dispose-symbol.js";
import { randomUUID } from "node:crypto";
import {
  CancellationTokenSource,
  ErrorCodes,
  ResponseError,
  StreamMessageReader,
  StreamMessageWriter,
  createMessageConnection,
  type Message,
  type MessageConnection,
  type MessageReader,
} from "vscode-jsonrpc/node";
import { resolveBinary } from "./binary.js";
import { Child, type Exit, type Logger } from "./child.js";
import { CancelledError, ConnectionClosedError, InvalidRequestError, StorageUnavailableError, errorFromReply } from "./errors.js";
import type * as P from "./protocol.js";
import type { Format, MethodName, Methods } from "./protocol.js";
import type { AddResponseParams } from "./responses.js";
import { serveRuntime, type Runtime } from "./runtime.js";
import { createSubscription, type SessionChange, type SubscribeOptions, type Subscription, type SubscriptionControl } from "./subscription.js";

export interface ConvoOptions {
  /** The convo binary; by default `CONVO_BINARY`, then the platform package for this machine (`@convo/linux-x64-gnu`, …; see `resolveBinary`). */
  binary?: string;
  /** `--store`: `sqlite` (convo's default), `sqlite:PATH` or `memory`. */
  store?: string;
  /** More command-line flags, e.g. `["--durability", "full"]`. */
  args?: readonly string[];
  /** The process's environment (`process.env` by default) and working folder. */
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Receives each line convo writes to stderr (its log; `--log-level` sets how much).
   * Default: the lines go to this process's stderr; `null` drops them. */
  logger?: Logger | null;
  /** Answers convo's `runtime/run` and `runtime/stream` requests: what `run()`, `json()`
   * and `stream()` use to reach the model. */
  runtime?: Runtime;
  /** How long `dispose()` waits for convo to finish what is in flight and exit before it
   * kills the process. Default 10 000 ms. */
  shutdownTimeoutMs?: number;
}

export interface CallOptions {
  /** Aborting sends `$/cancelRequest`. The call then rejects with `CancelledError` when
   * convo ended the request (nothing took effect but a stream's kept draft), or resolves
   * as usual when the change had already committed (a committed change is not undone). */
  signal?: AbortSignal;
}

/** `initialize` params: any are accepted; `runtime.format` adds `payload` to runtime requests. */
export type InitializeParams = P.InitializeParams & { runtime?: { format: Format } };

type Params<M extends MethodName> = Methods[M]["params"];
type Result<M extends MethodName> = Methods[M]["result"];

/** The appends: exactly once when convo says `capabilities.exactly_once` (see `#append`). */
type Append =
  | "session/add_user"
  | "session/add_assistant"
  | "session/add_tool_result"
  | "session/add_message"
  | "session/add_response"
  | "session/add_messages";

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** The params of an append with a message id for every message that has none: a random
 * UUID v4 (`crypto.randomUUID()`). `add_message` takes it beside the message or in it,
 * `add_messages` one in each message. A new object: the caller's are left as they are. */
function withMessageIds<M extends Append>(method: M, params: Params<M>): Params<M> {
  const p = params as Record<string, unknown>;
  if (method === "session/add_messages") {
    if (!Array.isArray(p.messages)) return params;
    const messages = p.messages.map((m: unknown) => (isObject(m) && m.message_id == null ? { ...m, message_id: randomUUID() } : m));
    return { ...p, messages } as Params<M>;
  }
  if (p.message_id != null) return params;
  if (method === "session/add_message" && isObject(p.message) && p.message.message_id != null) return params;
  return { ...p, message_id: randomUUID() } as Params<M>;
}

const defaultLogger: Logger = (line) => process.stderr.write(line + "\n");

const CHANGED = "session/changed";

/** Whether a message is a response (to a request of this client) or a `session/changed`
 * notification: vscode-jsonrpc queues every one it reads, and handles them in order. */
const isCounted = (message: Message): boolean =>
  !("method" in message) || (message as { method: string }).method === CHANGED;

/** Counts the responses (and changes) read, so that the connection is disposed only once
 * every one read before the process ended has been handled. */
function countingReader(reader: MessageReader, count: () => void): MessageReader {
  return {
    onError: reader.onError,
    onClose: reader.onClose,
    onPartialMessage: reader.onPartialMessage,
    listen: (callback) =>
      reader.listen((message) => {
        if (isCounted(message)) count();
        callback(message);
      }),
    dispose: () => reader.dispose(),
  };
}

export class ConvoClient {
  readonly #child: Child;
  readonly #connection: MessageConnection;
  readonly #closed = new AbortController();
  readonly #shutdownTimeoutMs: number;
  #exit: Exit | undefined;
  #disposed: Promise<void> | undefined;
  #info: P.InitializeResult | undefined;
  /** The live subscriptions of `subscribe()`, by subscription id. */
  readonly #subscriptions = new Map<string, SubscriptionControl>();
  /** While `subscribe()` calls wait for their id: the changes of ids not known yet. */
  #subscribing = 0;
  readonly #early = new Map<string, SessionChange[]>();
  /** Whether the connection has handled all it read and is disposed (the process ended). */
  #drained = false;

  /** Spawns convo, connects, and sends `initialize` (with the runtime's `format`). */
  static async start(options: ConvoOptions = {}): Promise<ConvoClient> {
    const client = new ConvoClient(options);
    try {
      const format = typeof options.runtime === "object" ? options.runtime.format : undefined;
      client.#info = await client.initialize(format ? { runtime: { format } } : {});
    } catch (e) {
      await client.#kill();
      throw e;
    }
    return client;
  }

  private constructor(options: ConvoOptions) {
    const runtime = options.runtime;
    if (typeof runtime === "object" && !runtime.run && !runtime.stream) {
      throw new TypeError("the runtime option needs a `run` or a `stream` function");
    }
    const binary = resolveBinary({ binary: options.binary });
    const args = [...(options.store ? ["--store", options.store] : []), ...(options.args ?? [])];
    this.#shutdownTimeoutMs = options.shutdownTimeoutMs ?? 10_000;
    this.#child = new Child(binary, args, {
      env: options.env,
      cwd: options.cwd,
      logger: options.logger === undefined ? defaultLogger : options.logger,
    });
    let read = 0;
    let handled = 0;
    const stdio = this.#child.process;
    this.#connection = createMessageConnection(
      countingReader(new StreamMessageReader(stdio.stdout), () => read++),
      new StreamMessageWriter(stdio.stdin),
      undefined,
      {
        messageStrategy: {
          handleMessage(message, next) {
            const result = next(message);
            if (isCounted(message)) handled++;
            return result;
          },
        },
      },
    );
    serveRuntime(this.#connection, runtime, this.#closed.signal, (d) => this.#child.hold(d));
    this.#connection.onNotification(CHANGED, (change: SessionChange) => this.#route(change));
    this.#connection.onError(() => {}); // write errors: the process is gone, and 'close' says so
    this.#connection.listen();
    void this.#child.exited.then((exit) => {
      this.#exit = exit;
      this.#closed.abort();
      // Let vscode-jsonrpc handle the responses it read before the end (one per turn of the
      // event loop), then reject what is left pending; ten turns without progress stop it.
      let last = handled;
      let stalls = 0;
      const dispose = () => {
        if (handled < read && stalls < 10) {
          stalls = handled === last ? stalls + 1 : 0;
          last = handled;
          setImmediate(dispose);
        } else {
          this.#connection.dispose();
          this.#drained = true;
          // Every change read has been delivered: the subscriptions end after them.
          const error = this.#disposed ? undefined : this.#closedError();
          for (const { close } of this.#subscriptions.values()) close(error);
          this.#subscriptions.clear();
        }
      };
      dispose();
    });
  }

  /** The process id of the convo child (undefined when it could not be started). */
  get pid(): number | undefined {
    return this.#child.process.pid;
  }

  /** What `initialize` answered: server info, protocol version and capabilities. */
  get info(): P.InitializeResult {
    return this.#info!;
  }

  /** Settles with the exit code and signal once the process has ended. */
  get exited(): Promise<Exit> {
    return this.#child.exited;
  }

  /**
   * Sends any request, typed when `method` is one of the protocol's. The typed methods
   * below are this with a name; use it for a method newer than this client.
   */
  request<M extends MethodName>(method: M, params?: Params<M>, options?: CallOptions): Promise<Result<M>>;
  request<R = unknown>(method: string, params?: object, options?: CallOptions): Promise<R>;
  async request(method: string, params?: object, options?: CallOptions): Promise<unknown> {
    if (this.#exit) throw this.#closedError();
    const signal = options?.signal;
    if (signal?.aborted) {
      throw new CancelledError(-32800, "request cancelled: its signal was aborted before it was sent", {
        kind: "request_cancelled",
        message_ids: [],
      });
    }
    const source = signal ? new CancellationTokenSource() : undefined;
    const cancel = () => source!.cancel();
    signal?.addEventListener("abort", cancel, { once: true });
    const args: unknown[] = params === undefined ? [] : [params];
    if (source) args.push(source.token);
    this.#child.hold(1);
    try {
      return await this.#connection.sendRequest(method, ...args);
    } catch (e) {
      if (!(e instanceof ResponseError)) throw this.#exit ? this.#closedError() : e;
      // A write that failed (EPIPE) means the process is gone: say how it ended.
      if (e.code === ErrorCodes.MessageWriteError) await this.#child.exited;
      const gone = e.code === ErrorCodes.MessageWriteError || e.code === ErrorCodes.PendingResponseRejected;
      throw gone && this.#exit ? this.#closedError() : errorFromReply(e.code, e.message, e.data);
    } finally {
      signal?.removeEventListener("abort", cancel);
      source?.dispose();
      this.#child.hold(-1);
    }
  }

  /**
   * An append, exactly once when convo's `initialize` said `capabilities.exactly_once`:
   * every message gets an id (the caller's `message_id`, else a UUID v4 chosen here), and
   * a call that failed with 1006 (`StorageUnavailableError`) is sent once more, the same;
   * a retry of a write that did commit is answered as the first time, plus `duplicate:
   * true`. No other error is retried. An older server would ignore the ids (a retry could
   * store twice): to it appends go as given, once.
   */
  async #append<M extends Append>(method: M, params: Params<M>, options?: CallOptions): Promise<Result<M>> {
    if (this.#info?.capabilities.exactly_once !== true) return this.request(method, params, options) as Promise<Result<M>>;
    const sent = withMessageIds(method, params);
    try {
      return (await this.request(method, sent, options)) as Result<M>;
    } catch (e) {
      if (!(e instanceof StorageUnavailableError)) throw e;
      return (await this.request(method, sent, options)) as Result<M>;
    }
  }

  // The protocol's methods, in protocol/openrpc.json's order.

  /** `initialize`: server info and capabilities (`start()` has sent it; see `info`). */
  initialize(params: InitializeParams = {}, options?: CallOptions): Promise<P.InitializeResult> {
    return this.request("initialize", params, options);
  }

  /** `shutdown`: waits for every earlier request and makes every write durable; every later
   * request fails with -32600. `dispose()` sends it, then `exit`. */
  shutdown(options?: CallOptions): Promise<null> {
    return this.request("shutdown", undefined, options);
  }

  /** `session/create`: a new session; 1002 when `session_id` is taken. */
  createSession(params: P.SessionCreateParams = {}, options?: CallOptions): Promise<P.SessionInfo> {
    return this.request("session/create", params, options);
  }

  /** `session/get`: a session's info; 1001 when there is none. */
  getSession(params: P.SessionGetParams, options?: CallOptions): Promise<P.SessionInfo> {
    return this.request("session/get", params, options);
  }

  /** `session/list`: a page of sessions, newest first; pass `next_cursor` as `cursor`. */
  listSessions(params: P.SessionListParams = {}, options?: CallOptions): Promise<P.SessionPage> {
    return this.request("session/list", params, options);
  }

  /** `session/update`: sets `system`, `cwd`, `title`, `metadata` (absent: kept; null: cleared). */
  updateSession(params: P.SessionUpdateParams, options?: CallOptions): Promise<P.SessionInfo> {
    return this.request("session/update", params, options);
  }

  /** `session/delete`: forks of the session keep their history. */
  deleteSession(params: P.SessionDeleteParams, options?: CallOptions): Promise<P.SessionDeleteResult> {
    return this.request("session/delete", params, options);
  }

  /** `session/delete_many`: deletes `session_ids`, or every session updated before
   * `updated_before`, atomically; `{deleted}` says how many. */
  deleteSessions(params: P.SessionDeleteManyParams, options?: CallOptions): Promise<P.SessionDeleteManyResult> {
    return this.request("session/delete_many", params, options);
  }

  // The appends take `message_id` (a UUID, the message's id; one is chosen when left
  // out), answer `duplicate: true` when that id holds this message already (1010
  // `MessageExistsError` when a different one), and are sent once more after 1006: see
  // `#append`.

  /** `session/add_user`: appends a user message (text, base64 images). */
  addUser(params: P.SessionAddUserParams, options?: CallOptions): Promise<P.Added> {
    return this.#append("session/add_user", params, options);
  }

  /** `session/add_assistant`: appends an assistant message: text, tool calls or both. */
  addAssistant(params: P.SessionAddAssistantParams, options?: CallOptions): Promise<P.Added> {
    return this.#append("session/add_assistant", params, options);
  }

  /** `session/add_tool_result`: answers a pending tool call; 1004 when the rules refuse it.
   * `images` (base64 or `{ref}`): what the tool returned as images (a screenshot, a plot),
   * exported inside the result where the format carries them. */
  addToolResult(params: P.SessionAddToolResultParams, options?: CallOptions): Promise<P.Added> {
    return this.#append("session/add_tool_result", params, options);
  }

  /** `session/add_message`: appends any message (`message_id` beside it or in it). */
  addMessage(params: P.SessionAddMessageParams, options?: CallOptions): Promise<P.Added> {
    return this.#append("session/add_message", params, options);
  }

  /** `session/add_response`: appends a provider's whole response object as its SDK returned
   * it (a streamed one assembled), e.g. `{format: "anthropic_messages", response: message}`:
   * one assistant message keeping the turn as it came (`native`: thinking, signatures,
   * reasoning items), its text and calls derived, its `usage` normalised (and summed into
   * the session's), `metadata` merged with `{response_id, stop_reason}`. `tool_call_ids`
   * are the ids the results must name. A response of another format, or with no assistant
   * output (failed, refused with no content, no candidate), is -32602 and stores nothing. */
  addResponse<F extends Format>(params: AddResponseParams<F>, options?: CallOptions): Promise<P.AddedResponse> {
    return this.#append("session/add_response", params as P.SessionAddResponseParams, options);
  }

  /** `session/add_messages`: appends several messages, all or nothing, as one revision; each
   * message may carry its `message_id` (one is chosen for each that has none). */
  addMessages(params: P.SessionAddMessagesParams, options?: CallOptions): Promise<P.AddedMany> {
    return this.#append("session/add_messages", params, options);
  }

  /** `session/history`: the messages, repaired by default (dangling calls answered as cancelled). */
  history(params: P.SessionHistoryParams, options?: CallOptions): Promise<P.History> {
    return this.request("session/history", params, options);
  }

  /** `session/trim`: keeps the last `max_turns` turns, or drops the oldest turns until the
   * history fits `max_tokens` (counted as `countTokens` counts the body of `format`, by
   * default openai_chat, with the body options `model`, `thinking`, `store`). */
  trim(params: P.SessionTrimParams & { max_tokens: number }, options?: CallOptions): Promise<P.TrimmedToFit>;
  trim(params: P.SessionTrimParams, options?: CallOptions): Promise<P.Trimmed>;
  trim(params: P.SessionTrimParams, options?: CallOptions): Promise<P.SessionTrimResult> {
    return this.request("session/trim", params, options);
  }

  /** `session/fork`: a new session sharing the history (up to `at_message_id`). */
  fork(params: P.SessionForkParams, options?: CallOptions): Promise<P.SessionInfo> {
    return this.request("session/fork", params, options);
  }

  /** `session/clear`: drops every message, keeps the system prompt, cwd, title and metadata. */
  clear(params: P.SessionClearParams, options?: CallOptions): Promise<P.Trimmed> {
    return this.request("session/clear", params, options);
  }

  /** `session/rewind`: drops every message after `to_message_id` (a tool-call group stays
   * whole); with `archive: true` the history as it was is kept as a new session first. */
  rewind(params: P.SessionRewindParams, options?: CallOptions): Promise<P.SessionRewindResult> {
    return this.request("session/rewind", params, options);
  }

  /** `session/pop`: removes the last stored message, whatever its role (a tool result's
   * call is open again), and returns it (null for an empty session); `replace_with` is
   * stored in its place in the same step. */
  pop(params: P.SessionPopParams, options?: CallOptions): Promise<P.SessionPopResult> {
    return this.request("session/pop", params, options);
  }

  /** `session/compact`: replaces the turns before the last `keep_turns` with one summary
   * message, given (`summary`) or asked of the host (`summarize: true`, through the
   * `runtime` option's `run` with `purpose: "summarize"`). */
  compact(params: P.SessionCompactParams, options?: CallOptions): Promise<P.SessionCompactResult> {
    return this.request("session/compact", params, options);
  }

  /** `session/image`: the image a ref (as `images: "ref"` shows it) names. */
  image(params: P.SessionImageParams, options?: CallOptions): Promise<P.SessionImageResult> {
    return this.request("session/image", params, options);
  }

  /** `session/search`: full-text search over message text (words, `prefix*`, `"phrases"`),
   * best match first, one page at a time (`next_cursor`); a message shared by forks is a
   * hit in each session holding it. */
  search(params: P.SessionSearchParams, options?: CallOptions): Promise<P.SearchPage> {
    return this.request("session/search", params, options);
  }

  /** `session/to_dict`: `{session_id, system, cwd, messages}`, for `fromDict` or the agent library. */
  toDict(params: P.SessionToDictParams, options?: CallOptions): Promise<P.Dict> {
    return this.request("session/to_dict", params, options);
  }

  /** `session/from_dict`: imports a `toDict` (or the generic agent library's) dict. */
  fromDict(params: P.SessionFromDictParams, options?: CallOptions): Promise<P.Imported> {
    return this.request("session/from_dict", params, options);
  }

  /** `session/export`: the provider-ready request body (OpenAI Chat or Responses, Anthropic,
   * Gemini generateContent or Interactions). A turn appended by `addResponse` in that format is replayed as it came; the
   * body options: `model` (replay only that model's turns), `thinking` (false: Anthropic
   * thinking blocks left out), `store` (false: Responses reasoning that cannot be replayed
   * statelessly left out). The context options (spec section 17) edit the body on its way
   * out, never the stored history: `compaction` (`"use"`, the default: start at the latest
   * compaction point of the format, `context.from_index` in the reply; `"ignore"`),
   * `clear_thinking`, `clear_tool_results` (the reply's `edits`), `fit` (`{max_tokens,
   * keep_turns?}`: the reply's `fit`; one that cannot be met rejects with `TooLargeError`,
   * `data.tokens` and `data.max_tokens`) and `cache` (`true`, `{ttl?, system_ttl?}` for
   * Anthropic breakpoints, `{key?, retention?}` for OpenAI's prompt cache). */
  export(params: P.SessionExportParams, options?: CallOptions): Promise<P.Exported> {
    return this.request("session/export", params, options);
  }

  /** `session/validate`: what a provider would reject in the stored history, in its words
   * (with `export`'s body options: `thinking: true` adds `thinking_required`, `store: false`
   * `reasoning_not_replayable`; with `cache`, the breakpoints export would place are
   * checked too: `cache_breakpoints`, `cache_ttl_order`). */
  validate(params: P.SessionValidateParams, options?: CallOptions): Promise<P.Validated> {
    return this.request("session/validate", params, options);
  }

  /** `session/count_tokens`: the tokens of the body `export` would send with the same
   * options (the system prompt plus the repaired history for `format`, from the latest
   * compaction point, edited and fitted), in o200k_base tokens: `{tokens, context?, edits?,
   * fit?}` (`Counted`; `tokens` as before). With `fit`, a preview of the fitted body. */
  countTokens(params: P.SessionCountTokensParams, options?: CallOptions): Promise<P.Counted> {
    return this.request("session/count_tokens", params, options);
  }

  /** `session/run`: one turn through the `runtime` option's `run`; stores the user
   * message and the answer together. */
  run(params: P.SessionRunParams, options?: CallOptions): Promise<P.RunAnswer> {
    return this.request("session/run", params, options);
  }

  /** `session/json`: a turn whose answer must be JSON valid against `schema`; `value` is it parsed. */
  json<T = unknown>(params: P.SessionJsonParams, options?: CallOptions): Promise<P.JsonAnswer & { value: T }> {
    return this.request("session/json", params, options) as Promise<P.JsonAnswer & { value: T }>;
  }

  /** `session/stream`: a turn through the runtime's `stream` (its chunks are sent as
   * `runtime/delta` and kept as a draft meanwhile); resolves with the stored answer. */
  stream(params: P.SessionStreamParams, options?: CallOptions): Promise<P.RunAnswer> {
    return this.request("session/stream", params, options);
  }

  /** `session/subscribe`: the raw request. Its `session/changed` notifications reach only
   * the subscriptions of `subscribe()`, which sends it and iterates them. */
  subscribeSession(params: P.SessionSubscribeParams = {}, options?: CallOptions): Promise<P.SessionSubscribeResult> {
    return this.request("session/subscribe", params, options);
  }

  /** `session/unsubscribe`: stops a subscription; an unknown id is -32602. Ending a
   * `subscribe()` iterator sends it. */
  unsubscribeSession(params: P.SessionUnsubscribeParams, options?: CallOptions): Promise<null> {
    return this.request("session/unsubscribe", params, options);
  }

  /**
   * Watches committed changes, of one session (`session_id`, which need not exist yet) or
   * of every session, made by this process or any other on the same store: sends
   * `session/subscribe` and returns an async iterator of its `session/changed`
   * notifications. Per session they come in revision order, and the last change is
   * always told (several may be coalesced into the latest). Ending the iterator
   * (`break`, `return()`, `await using`, or aborting `signal`) sends `session/unsubscribe`;
   * it also ends when the client is disposed (and rejects with `ConnectionClosedError`
   * when convo exits on its own).
   */
  async subscribe(params: P.SessionSubscribeParams = {}, options: SubscribeOptions = {}): Promise<Subscription> {
    let id: string | undefined;
    let early: SessionChange[] | undefined;
    this.#subscribing++;
    try {
      id = (await this.subscribeSession(params, options)).subscription_id;
    } finally {
      // The changes told before the reply was read (convo answers first; kept anyway).
      if (id !== undefined) early = this.#early.get(id);
      if (--this.#subscribing === 0) this.#early.clear();
      else if (id !== undefined) this.#early.delete(id);
    }
    const subscriptionId = id;
    const hooks = { unsubscribe: () => this.#unsubscribe(subscriptionId), hold: (d: 1 | -1) => this.#child.hold(d) };
    const control = createSubscription(subscriptionId, hooks);
    if (this.#drained) control.close(this.#disposed ? undefined : this.#closedError());
    else {
      this.#subscriptions.set(subscriptionId, control);
      for (const change of early ?? []) control.deliver(change);
      control.watch(options.signal);
    }
    return control.subscription;
  }

  /**
   * Ends convo in order: `shutdown` (it finishes what is in flight and makes every write
   * durable), `exit`, then waits for the process to end; kills it after
   * `shutdownTimeoutMs`. Later calls reject with `ConnectionClosedError`. Idempotent.
   */
  dispose(): Promise<void> {
    return (this.#disposed ??= this.#shutdown());
  }

  async [Symbol.asyncDispose](): Promise<void> {
    return this.dispose();
  }

  async #shutdown(): Promise<void> {
    this.#child.hold(1);
    const timer = setTimeout(() => this.#child.process.kill("SIGKILL"), this.#shutdownTimeoutMs);
    try {
      if (!this.#exit) {
        try {
          await this.shutdown();
          await this.#connection.sendNotification("exit");
        } catch {
          // The process is gone or going; waiting for its end below settles it.
        }
        this.#child.process.stdin.end();
      }
      await this.#child.exited;
    } finally {
      clearTimeout(timer);
      this.#child.hold(-1);
    }
  }

  #route(change: SessionChange): void {
    const id = change?.subscription_id;
    const subscription = this.#subscriptions.get(id);
    if (subscription) subscription.deliver(change);
    else if (this.#subscribing > 0 && typeof id === "string") {
      const list = this.#early.get(id);
      if (list) list.push(change);
      else this.#early.set(id, [change]);
    }
    // else: a subscription that ended (or one made with subscribeSession): dropped.
  }

  /** Forgets a subscription of `subscribe()` at once (later changes are dropped), then
   * tells convo; nothing to tell when convo is gone or shutting down. */
  async #unsubscribe(id: string): Promise<void> {
    this.#subscriptions.delete(id);
    if (this.#exit || this.#disposed) return;
    try {
      await this.unsubscribeSession({ subscription_id: id });
    } catch (e) {
      // The process ended meanwhile, or dispose() sent shutdown first (-32600).
      if (!(e instanceof ConnectionClosedError || e instanceof InvalidRequestError)) throw e;
    }
  }

  async #kill(): Promise<void> {
    this.#child.hold(1);
    this.#child.process.kill("SIGKILL");
    await this.#child.exited;
    this.#child.hold(-1);
  }

  #closedError(): ConnectionClosedError {
    const exit = this.#exit!;
    const how = exit.error
      ? `could not be started: ${exit.error.message}`
      : this.#disposed
        ? "has exited (the client was disposed)"
        : `exited ${exit.signal ? `on ${exit.signal}` : `with code ${exit.code}`}`;
    const tail = this.#child.stderrTail;
    const message = `convo ${how}${tail.length ? `; its last words on stderr:\n${tail.join("\n")}` : ""}`;
    return new ConnectionClosedError(ConnectionClosedError.CODE, message, {
      kind: "connection_closed",
      exit_code: exit.code,
      signal: exit.signal,
    });
  }
}

/** The client method of every protocol method. Typed so that a method added to
 * protocol/openrpc.json (and `npm run gen`) fails the build until it has one. */
export const CLIENT_METHODS = {
  initialize: "initialize",
  shutdown: "shutdown",
  "session/create": "createSession",
  "session/get": "getSession",
  "session/list": "listSessions",
  "session/update": "updateSession",
  "session/delete": "deleteSession",
  "session/delete_many": "deleteSessions",
  "session/add_user": "addUser",
  "session/add_assistant": "addAssistant",
  "session/add_tool_result": "addToolResult",
  "session/add_message": "addMessage",
  "session/add_response": "addResponse",
  "session/add_messages": "addMessages",
  "session/history": "history",
  "session/trim": "trim",
  "session/fork": "fork",
  "session/clear": "clear",
  "session/rewind": "rewind",
  "session/pop": "pop",
  "session/image": "image",
  "session/compact": "compact",
  "session/search": "search",
  "session/to_dict": "toDict",
  "session/from_dict": "fromDict",
  "session/export": "export",
  "session/validate": "validate",
  "session/count_tokens": "countTokens",
  "session/run": "run",
  "session/json": "json",
  "session/stream": "stream",
  "session/subscribe": "subscribeSession",
  "session/unsubscribe": "unsubscribeSession",
} as const satisfies Record<MethodName, keyof ConvoClient>;
