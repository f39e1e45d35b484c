/**
 * The window's one convo process: started on first use with the settings (`convo.store`,
 * `convo.binaryPath`, `convo.pgListenUrl`), watched with one `session/subscribe` for every
 * session (each change fired as an event), started again when the settings change or
 * after the process ended. `exports.client()` hands out the same client.
 */
import { accessSync, chmodSync, constants, existsSync } from "node:fs";
import { join } from "node:path";
import { ConvoClient, type SessionChange } from "convo";
import * as vscode from "vscode";

/** The binary: `convo.binaryPath`, else the one the .vsix carries, else `convo` on PATH. */
export function binaryFor(extensionPath: string, configured: string | undefined): string {
  if (configured?.trim()) return configured.trim();
  const bundled = join(extensionPath, "bin", process.platform === "win32" ? "convo.exe" : "convo");
  if (!existsSync(bundled)) return "convo";
  if (process.platform !== "win32") {
    try {
      accessSync(bundled, constants.X_OK);
    } catch {
      chmodSync(bundled, 0o755); // an unzip that dropped the mode the .vsix records
    }
  }
  return bundled;
}

export class Connection implements vscode.Disposable {
  readonly #changed = new vscode.EventEmitter<SessionChange>();
  /** A committed change to a session, made by this window or any other process. */
  readonly onDidChange = this.#changed.event;
  readonly #restarted = new vscode.EventEmitter<void>();
  /** A new convo process was started (the settings changed): everything shown is stale. */
  readonly onDidRestart = this.#restarted.event;
  #client: Promise<ConvoClient> | undefined;
  #disposed = false;

  constructor(
    private readonly extensionPath: string,
    private readonly log: vscode.LogOutputChannel,
  ) {}

  /** The running client, started when there is none. */
  client(): Promise<ConvoClient> {
    if (this.#disposed) return Promise.reject(new Error("the convo extension has been deactivated"));
    this.#client ??= this.#start();
    return this.#client;
  }

  async #start(): Promise<ConvoClient> {
    const config = vscode.workspace.getConfiguration("convo");
    const binary = binaryFor(this.extensionPath, config.get<string>("binaryPath"));
    const store = config.get<string>("store")?.trim() || undefined;
    const listen = config.get<string>("pgListenUrl")?.trim();
    this.log.info(`starting ${binary}${store ? ` --store ${store.replace(/:\/\/([^:@/]*):[^@/]*@/, "://$1:***@")}` : ""}`);
    let client: ConvoClient;
    try {
      client = await ConvoClient.start({
        binary,
        store,
        args: listen ? ["--pg-listen-url", listen] : [],
        logger: (line) => this.log.info(line),
      });
    } catch (e) {
      this.#client = undefined;
      const message = e instanceof Error ? e.message : String(e);
      this.log.error(`convo did not start: ${message}`);
      throw new Error(`convo did not start (${binary}): ${message}`);
    }
    this.log.info(`convo ${client.info.server_info.version}, store ${client.info.capabilities.store}, pid ${client.pid}`);
    const current = this.#client;
    void client.exited.then((exit) => {
      this.log.info(`convo exited (code ${exit.code}, signal ${exit.signal})`);
      if (this.#client === current) this.#client = undefined;
    });
    void this.#watch(client);
    return client;
  }

  async #watch(client: ConvoClient): Promise<void> {
    try {
      for await (const change of await client.subscribe()) this.#changed.fire(change);
    } catch (e) {
      if (!this.#disposed) this.log.warn(`watching stopped: ${e instanceof Error ? e.message : e}`);
    }
  }

  /** Stops the process and starts a new one with the current settings. */
  async restart(): Promise<void> {
    const old = this.#client;
    this.#client = undefined;
    if (old) await old.then((c) => c.dispose(), () => {});
    this.#restarted.fire();
  }

  dispose(): void {
    this.#disposed = true;
    const old = this.#client;
    this.#client = undefined;
    if (old) void old.then((c) => c.dispose(), () => {});
    this.#changed.dispose();
    this.#restarted.dispose();
  }
}
