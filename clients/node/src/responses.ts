/**
 * A provider's whole response object, as `session/add_response` and a host runtime's
 * `{format, response}` answer take it (protocol/README.md, session/add_response). Only
 * the members convo checks are typed, so that each SDK's own type is assignable as it is
 * (Anthropic `Message`, OpenAI `ChatCompletion` and `Response`, Gemini
 * `GenerateContentResponse`, Gemini Interactions `Interaction`), a parsed REST body too,
 * and a response of another provider than `format` says is a type error.
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
  /** Gemini Interactions: an `Interaction` whose `steps` are the turn (`completed`, or
   * `requires_action` when it ends in function calls; not `failed`). */
  gemini_interactions: Interaction;
}

/**
 * A Gemini Interactions API `Interaction` (`POST /v1beta/interactions`), as js-genai's
 * `Interaction` types it, with `object` beside it: the wire carries `object:
 * "interaction"` though the SDK's type lacks it, and a body without it is taken too.
 * `id` is absent when the interaction was not stored (`store: false`); `steps` and
 * `usage` are absent from a `failed` one, which has `errors` instead.
 */
export type Interaction = {
  id?: string;
  object?: "interaction";
  /** `in_progress`, `requires_action`, `completed`, `failed`, `cancelled`, `incomplete`, … */
  status: string;
  model?: string;
  steps?: readonly InteractionStep[];
  usage?: InteractionUsage;
  created?: string;
  updated?: string;
  service_tier?: string;
  errors?: readonly { code?: string; message?: string }[];
} & Rest;

/** A step of an Interaction, typed by `type`: also what an export to `gemini_interactions`
 * holds in `input`. `signature` on a thought (and on a built-in tool's step) must go back
 * to the API as it came. The last member is open: Google adds step types (a newer SDK's
 * are assignable). */
export type InteractionStep =
  | { type: "user_input"; content?: readonly InteractionContent[] }
  | { type: "model_output"; content?: readonly InteractionContent[]; error?: { code?: number; message?: string; details?: readonly object[] } }
  | { type: "thought"; signature?: string; summary?: readonly InteractionContent[] }
  | { type: "function_call"; id: string; name: string; arguments: { [member: string]: any } }
  | { type: "function_result"; call_id: string; name?: string; result: readonly InteractionContent[] | object | string; is_error?: boolean }
  | ({ type: BuiltInToolStep | (string & {}); signature?: string } & Rest);

/** The steps of Gemini's own tools, run by the API (a call and its result each). */
export type BuiltInToolStep = `${"google_search" | "google_maps" | "code_execution" | "url_context" | "file_search" | "mcp_server_tool"}_${"call" | "result"}`;

/** A content block of a step: text (with `annotations` on model output), or media inline
 * (`data`, base64) or by `uri`. */
export type InteractionContent =
  | { type: "text"; text: string; annotations?: readonly object[] }
  | ({ type: "image" | "audio" | "document" | "video"; data?: string; uri?: string; mime_type?: string } & Rest);

/** An Interaction's token counts (`total_thought_tokens` is not inside `total_output_tokens`). */
export type InteractionUsage = {
  total_tokens?: number;
  total_input_tokens?: number;
  total_cached_tokens?: number;
  total_output_tokens?: number;
  total_tool_use_tokens?: number;
  total_thought_tokens?: number;
  input_tokens_by_modality?: readonly { modality?: string; tokens?: number }[];
  output_tokens_by_modality?: readonly { modality?: string; tokens?: number }[];
  cached_tokens_by_modality?: readonly { modality?: string; tokens?: number }[];
  tool_use_tokens_by_modality?: readonly { modality?: string; tokens?: number }[];
} & Rest;

/** A response and its format. With `F` one format, `response` must be that provider's;
 * with `F` = `Format` (a format known only at run time), any of them. */
export interface ProviderResponse<F extends Format = Format> {
  format: F;
  response: ProviderResponses[F];
}

/** The params of `addResponse`: `session/add_response`'s, `format` and `response` paired. */
export type AddResponseParams<F extends Format = Format> = Omit<SessionAddResponseParams, "format" | "response"> &
  ProviderResponse<F>;
