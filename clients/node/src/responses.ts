/**
 * A provider's whole response object, as `session/add_response` and a host runtime's
 * `{format, response}` answer take it (protocol/README.md, session/add_response). Only
 * the members convo checks are typed, so that each SDK's own type is assignable as it is
 * (Anthropic `Message`, OpenAI `ChatCompletion` and `Response`, Gemini
 * `GenerateContentResponse`), a parsed REST body too, and a response of another
 * provider than `format` says is a type error.
 */
import type { Format, SessionAddResponseParams } from "./protocol.js";

/** The members of a response convo does not check: any (`any`, not `unknown`, so that an
 * SDK's interface type, which has no index signature, is assignable). */
type Rest = { [member: string]: any };

/** The response each format takes. */
export interface ProviderResponses {
  /** Chat Completions: a `chat.completion` (DeepSeek's too); its `choices[0].message` is the turn. */
  openai_chat: { object: "chat.completion"; choices: readonly object[] } & Rest;
  /** The Responses API: a `response` whose `output` items are the turn (not `failed` or
   * `cancelled`), or the compact endpoint's result (`POST /v1/responses/compact`,
   * `object: "response.compaction"`): its `output` is stored as one compaction point. */
  openai_responses: { object: "response" | "response.compaction"; output: readonly object[] } & Rest;
  /** Anthropic Messages: a `message` whose `content` blocks are the turn. */
  anthropic_messages: { type: "message"; content: readonly object[] } & Rest;
  /** Gemini: a `GenerateContentResponse`; candidate 0's `content` is the turn. Every member
   * is optional (as in Google's SDK), so it is told from the others by what it lacks:
   * `type` (Anthropic) and `object` (OpenAI). */
  gemini_contents: { candidates?: readonly object[]; promptFeedback?: object; type?: never; object?: never } & Rest;
}

/** A response and its format. With `F` one format, `response` must be that provider's;
 * with `F` = `Format` (a format known only at run time), any of the four. */
export interface ProviderResponse<F extends Format = Format> {
  format: F;
  response: ProviderResponses[F];
}

/** The params of `addResponse`: `session/add_response`'s, `format` and `response` paired. */
export type AddResponseParams<F extends Format = Format> = Omit<SessionAddResponseParams, "format" | "response"> &
  ProviderResponse<F>;
