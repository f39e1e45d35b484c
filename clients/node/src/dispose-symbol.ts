/**
 * `Symbol.asyncDispose` where the runtime lacks it (Node 18.0–18.17, 20.0–20.3), under the
 * registered name TypeScript's `await using` looks up in that case.
 */
(Symbol as { asyncDispose?: symbol }).asyncDispose ??= Symbol.for("Symbol.asyncDispose");
export {};
