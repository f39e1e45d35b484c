/**
 * Errors: every error reply of convo becomes a `ConvoError` (`code`, `kind`, `data`), of the
 * subclass for its code, so a host can `catch (e) { if (e instanceof RevisionConflictError) … }`
 * or switch on `e.kind`. `errorFromReply` is the one place a reply's error is mapped.
 */
import {
  ERRORS,
  type ErrorCode,
  type InvalidOutputData,
  type InvalidSequenceData,
  type MessageExistsData,
  type MessageNotFoundData,
  type RequestCancelledData,
  type RevisionConflictData,
  type RuntimeFailedData,
  type SessionExistsData,
  type SessionNotFoundData,
  type StorageUnavailableData,
  type TooLargeData,
} from "./protocol.js";

/** An error reply from convo, or the connection to it ending. */
export class ConvoError<Data = unknown> extends Error {
  /** The JSON-RPC error code: the protocol's (1001…1010, -32800, -32700…-32603), or
   * {@link ConnectionClosedError.CODE} when the process went away. */
  readonly code: number;
  /** `data.kind` (`"session_not_found"`, …), or for the JSON-RPC codes, which carry no data,
   * the code's name (`"invalid_params"`, `"method_not_found"`, …). */
  readonly kind: string;
  /** The error's `data` as convo sent it (`undefined` when it sent none). */
  readonly data: Data;

  constructor(code: number, message: string, data?: Data, kind?: string) {
    super(message);
    this.code = code;
    this.data = data as Data;
    const dataKind = (data as { kind?: unknown } | undefined)?.kind;
    this.kind = kind ?? (typeof dataKind === "string" ? dataKind : (ERRORS[String(code) as ErrorCode]?.kind ?? "unknown"));
  }

  override get name(): string {
    return this.constructor.name;
  }
}

/** -32700: the frame was not JSON. */
export class ParseError extends ConvoError {}
/** -32600: not a JSON-RPC request, or a request after `shutdown`. */
export class InvalidRequestError extends ConvoError {}
/** -32601: no such method. */
export class MethodNotFoundError extends ConvoError {}
/** -32602: wrong type, missing member, bad session id, …; the message names the member. */
export class InvalidParamsError extends ConvoError {}
/** -32603: a bug in convo; the request did not take effect. */
export class InternalError extends ConvoError {}
/** 1001: no such session. */
export class SessionNotFoundError extends ConvoError<SessionNotFoundData> {}
/** 1002: create, fork or from_dict onto a taken id. */
export class SessionExistsError extends ConvoError<SessionExistsData> {}
/** 1003: `expected_revision` differs (`data.current_revision`), or the session changed while
 * the host answered a run (`data.response` holds the answer). Nothing changed. */
export class RevisionConflictError extends ConvoError<RevisionConflictData> {}
/** 1004: a tool result the conversation rules do not accept (`data.reason`). Nothing stored. */
export class InvalidSequenceError extends ConvoError<InvalidSequenceData> {}
/** 1005: a frame, request or reply over convo's limits (`data.limit`), or a `fit` that
 * cannot be met (`data.tokens`: the smallest body convo could make; `data.max_tokens`:
 * the budget asked for). */
export class TooLargeError extends ConvoError<TooLargeData> {}
/** 1006: the store failed; the request did not take effect. */
export class StorageUnavailableError extends ConvoError<StorageUnavailableData> {}
/** 1007: `at_message_id` is not in the session. */
export class MessageNotFoundError extends ConvoError<MessageNotFoundData> {}
/** 1008: the host's runtime failed (`data.reason`: error, no_runtime, timeout, …). */
export class RuntimeFailedError extends ConvoError<RuntimeFailedData> {}
/** 1009: `session/json`'s last answer is not JSON or breaks the schema (`data.errors`). */
export class InvalidOutputError extends ConvoError<InvalidOutputData> {}
/** 1010: the `message_id` given to an append is held in the session by a different message
 * (`data.message_id`), or an `addMessages` retry matches only some of its messages. Nothing
 * stored. */
export class MessageExistsError extends ConvoError<MessageExistsData> {}
/** -32800: the call was cancelled (its `AbortSignal`); nothing took effect but what a
 * stream kept (`data.message_ids`). */
export class CancelledError extends ConvoError<RequestCancelledData> {}

/** The convo process went away (it exited, was killed, or the client was disposed); the
 * message ends with its last lines on stderr, if any. */
export class ConnectionClosedError extends ConvoError<{ kind: "connection_closed"; exit_code: number | null; signal: string | null }> {
  /** vscode-jsonrpc's code for a request still pending when its connection ended. */
  static readonly CODE = -32097;
}

type ErrorClass = new (code: number, message: string, data?: any) => ConvoError;

/** The class of every code in protocol/openrpc.json (a test checks that none is missing). */
export const ERROR_CLASSES: Record<ErrorCode, ErrorClass> = {
  "-32700": ParseError,
  "-32600": InvalidRequestError,
  "-32601": MethodNotFoundError,
  "-32602": InvalidParamsError,
  "-32603": InternalError,
  "1001": SessionNotFoundError,
  "1002": SessionExistsError,
  "1003": RevisionConflictError,
  "1004": InvalidSequenceError,
  "1005": TooLargeError,
  "1006": StorageUnavailableError,
  "1007": MessageNotFoundError,
  "1008": RuntimeFailedError,
  "1009": InvalidOutputError,
  "1010": MessageExistsError,
  "-32800": CancelledError,
};

/** The error for an error reply `{code, message, data}`. */
export function errorFromReply(code: number, message: string, data?: unknown): ConvoError {
  const Class = ERROR_CLASSES[String(code) as ErrorCode] ?? ConvoError;
  return new Class(code, message, data);
}
