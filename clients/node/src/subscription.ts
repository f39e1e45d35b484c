/**
 * `Subscription`: what `client.subscribe()` returns, an async iterator of the
 * `session/changed` notifications of one `session/subscribe`. The client routes each
 * notification to its subscription by `subscription_id`; ending the iterator (`return()`,
 * `break` out of `for await`, the signal, `await using`) sends `session/unsubscribe`.
 */
import "./dispose-symbol.js";
import type { SessionChangedParams } from "./protocol.js";

/** A committed change, as `session/changed` tells it: `{subscription_id, session_id,
 * revision, change, message_count}`. */
export type SessionChange = SessionChangedParams;

export interface SubscribeOptions {
  /** Aborting ends the iteration (a waiting `next()` resolves done) and unsubscribes.
   * Aborted before `subscribe()` resolves: it rejects with `CancelledError` when convo
   * ended the request, else it resolves with a subscription that has already ended. */
  signal?: AbortSignal;
}

/** What the client gives a subscription: how to unsubscribe, and how to keep the host's
 * event loop alive while a `next()` waits. */
interface Hooks {
  unsubscribe(): Promise<void>;
  hold(delta: 1 | -1): void;
}

type Waiter = {
  resolve(result: IteratorResult<SessionChange, undefined>): void;
  reject(error: unknown): void;
};

const DONE: IteratorResult<SessionChange, undefined> = Object.freeze({ done: true, value: undefined });

/** The client's side of a subscription: hands it a change, ends it when the connection ends. */
export interface SubscriptionControl {
  readonly subscription: Subscription;
  deliver(change: SessionChange): void;
  /** The connection ended: the changes already received are still read, then the iteration
   * ends; with `error`, `next()` rejects with it once (convo exited unexpectedly). */
  close(error?: Error): void;
  /** Ends the subscription when `signal` is aborted (at once when it already is). */
  watch(signal: AbortSignal | undefined): void;
}

let control!: (id: string, hooks: Hooks) => SubscriptionControl;

/**
 * The changes of one subscription, in the order convo told them: per session in revision
 * order, the last change always told. Changes not yet read are kept one per session (a
 * newer change of a session replaces its unread one, in its place), as convo itself does
 * for a slow reader, so a subscription nobody reads costs one change per session.
 *
 * ```ts
 * for await (const change of await client.subscribe({ session_id })) {
 *   if (change.change === "deleted") break; // unsubscribes
 * }
 * ```
 */
export class Subscription implements AsyncIterableIterator<SessionChange>, AsyncDisposable {
  /** The `subscription_id` convo gave it. */
  readonly id: string;
  readonly #hooks: Hooks;
  /** Unread changes by session, in the order their sessions were first told. */
  readonly #unread = new Map<string, SessionChange>();
  readonly #waiters: Waiter[] = [];
  #ended = false;
  #error: Error | undefined;
  #unsubscribed: Promise<void> | undefined;
  #signal: AbortSignal | undefined;
  readonly #onAbort = () => void this.#end().catch(() => {});

  static {
    control = (id, hooks) => {
      const subscription = new Subscription(id, hooks);
      return {
        subscription,
        deliver: (change) => subscription.#deliver(change),
        close: (error) => subscription.#close(error),
        watch: (signal) => subscription.#watch(signal),
      };
    };
  }

  private constructor(id: string, hooks: Hooks) {
    this.id = id;
    this.#hooks = hooks;
  }

  /** The next change; waits for one (keeping the host process alive meanwhile). Resolves
   * done once the subscription has ended. */
  next(): Promise<IteratorResult<SessionChange, undefined>> {
    const first = this.#unread.entries().next();
    if (!first.done) {
      const [session, change] = first.value;
      this.#unread.delete(session);
      return Promise.resolve({ done: false, value: change });
    }
    if (this.#error) {
      const error = this.#error;
      this.#error = undefined;
      return Promise.reject(error);
    }
    if (this.#ended) return Promise.resolve(DONE);
    this.#hooks.hold(1);
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  /** Ends the iteration and sends `session/unsubscribe` (once; resolves when convo has
   * answered). Unread changes are dropped. `break` in `for await` calls it. */
  async return(): Promise<IteratorResult<SessionChange, undefined>> {
    await this.#end();
    return DONE;
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  /** `await using sub = await client.subscribe()`: `return()` at the end of the scope. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.#end();
  }

  #end(): Promise<void> {
    if (!this.#unsubscribed) {
      this.#unread.clear();
      this.#finish();
      this.#unsubscribed = this.#hooks.unsubscribe();
    }
    return this.#unsubscribed;
  }

  #watch(signal: AbortSignal | undefined): void {
    if (!signal || this.#ended) return;
    if (signal.aborted) return this.#onAbort();
    this.#signal = signal;
    signal.addEventListener("abort", this.#onAbort, { once: true });
  }

  #deliver(change: SessionChange): void {
    if (this.#ended) return;
    const waiter = this.#waiters.shift();
    if (waiter) {
      this.#hooks.hold(-1);
      waiter.resolve({ done: false, value: change });
    } else {
      this.#unread.set(change.session_id, change); // a session already unread keeps its place
    }
  }

  #close(error?: Error): void {
    if (this.#ended) return;
    this.#unsubscribed ??= Promise.resolve(); // convo is gone: nothing to unsubscribe
    this.#finish(error);
  }

  /** Ends the iteration: settles every waiting `next()` (done, or the first with `error`). */
  #finish(error?: Error): void {
    this.#ended = true;
    this.#signal?.removeEventListener("abort", this.#onAbort);
    const waiters = this.#waiters.splice(0);
    for (const waiter of waiters) {
      this.#hooks.hold(-1);
      if (error) {
        waiter.reject(error);
        error = undefined;
      } else waiter.resolve(DONE);
    }
    this.#error = error;
  }
}

/** Makes a subscription and the client's handle on it (not exported from the package). */
export function createSubscription(id: string, hooks: Hooks): SubscriptionControl {
  return control(id, hooks);
}
