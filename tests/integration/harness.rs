//! Spawns the real `convo` binary on pipes and talks to it as a client would. Every
//! result is checked against its method's result schema in protocol/openrpc.json, every
//! error against the error table there, and stdout must hold nothing but frames.
//!
//! The client may also be the host runtime (issue 10): convo then sends it requests
//! (`runtime/run`, ids `convo:<n>`) and notifications between the replies to the
//! client's own requests. Every way of receiving takes the first frame it wants and keeps
//! the frames it passes over, in order, for later calls.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

pub use serde_json::{Value, json};

/// How long any one reply may take before a test fails instead of hanging.
pub const PATIENCE: Duration = Duration::from_secs(20);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    Lsp,
    Ndjson,
}

impl Framing {
    pub fn encode(self, body: &[u8]) -> Vec<u8> {
        match self {
            Framing::Lsp => [format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes(), body].concat(),
            Framing::Ndjson => [body, b"\n"].concat(),
        }
    }
}

/// The backend a server keeps its sessions in; every behaviour test runs on each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Memory,
    /// A fresh database file in a temporary folder of the server's own.
    Sqlite,
    /// A fresh schema in the database `CONVO_TEST_POSTGRES` names.
    Postgres,
}

/// The PostgreSQL database the tests use: `CONVO_TEST_POSTGRES` (scripts/test starts a
/// server and sets it). Unset, PostgreSQL tests are skipped with a loud message; in CI
/// (`CI` set) they fail instead, so they can never be skipped there unseen.
pub fn postgres_url() -> Option<String> {
    match std::env::var("CONVO_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => {
            panic!("CONVO_TEST_POSTGRES is not set in CI: the PostgreSQL tests must run (bash scripts/test sets it)")
        }
        _ => {
            eprintln!("SKIPPED: a PostgreSQL test; set CONVO_TEST_POSTGRES (see scripts/postgres) to run it");
            None
        }
    }
}

/// The PostgreSQL server itself, not through the pooler `CONVO_TEST_POSTGRES` may name
/// (scripts/test sets `CONVO_TEST_POSTGRES_DIRECT` when it starts PgBouncer): for LISTEN
/// and for looking at the server's own connections.
pub fn postgres_direct_url() -> Option<String> {
    match std::env::var("CONVO_TEST_POSTGRES_DIRECT") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => postgres_url(),
    }
}

/// A schema name no other test uses, so that every PostgreSQL test starts empty.
pub fn fresh_schema() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("t_{}_{n}_{nanos}", std::process::id())
}

/// A store several processes can open: a database file, or a PostgreSQL schema.
#[derive(Clone, Debug)]
pub enum Place {
    File(std::path::PathBuf),
    Postgres { url: String, schema: String },
}

impl Place {
    /// A fresh place of `backend` (`None`: PostgreSQL tests are skipped); the folder
    /// returned with a file must outlive its servers.
    pub fn fresh(backend: Backend) -> Option<(Place, Option<tempfile::TempDir>)> {
        match backend {
            Backend::Memory => panic!("a memory store is not shared"),
            Backend::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                Some((Place::File(dir.path().join("sessions.db")), Some(dir)))
            }
            Backend::Postgres => Some((Place::Postgres { url: postgres_url()?, schema: fresh_schema() }, None)),
        }
    }

    fn args(&self) -> Vec<String> {
        match self {
            Place::File(path) => vec!["--store".into(), format!("sqlite:{}", path.display())],
            Place::Postgres { url, schema } => {
                vec!["--store".into(), url.clone(), "--pg-schema".into(), schema.clone()]
            }
        }
    }

    pub fn backend(&self) -> Backend {
        match self {
            Place::File(_) => Backend::Sqlite,
            Place::Postgres { .. } => Backend::Postgres,
        }
    }
}

pub struct Server {
    pub backend: Backend,
    /// The database folder of a SQLite server; removed with the server.
    _dir: Option<tempfile::TempDir>,
    child: Child,
    stdin: Option<ChildStdin>,
    replies: Receiver<Result<Value, String>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    pub framing: Framing,
    next_id: u64,
    /// Frames received but passed over while waiting for another, oldest first.
    backlog: VecDeque<Value>,
}

impl Server {
    pub fn start(framing: Framing) -> Server {
        Server::with_args(framing, &[])
    }

    pub fn with_args(framing: Framing, args: &[&str]) -> Server {
        Server::on(Backend::Memory, framing, args)
    }

    pub fn on(backend: Backend, framing: Framing, args: &[&str]) -> Server {
        Server::on_maybe(backend, framing, args).expect("a PostgreSQL test runs only when CONVO_TEST_POSTGRES is set")
    }

    /// As `on`; `None` when `backend` is PostgreSQL and no test database is set.
    pub fn on_maybe(backend: Backend, framing: Framing, args: &[&str]) -> Option<Server> {
        if backend == Backend::Memory {
            return Some(Server::spawn(backend, None, framing, &[&["--store", "memory"], args].concat()));
        }
        let (place, dir) = Place::fresh(backend)?;
        let place_args = place.args();
        let mut all: Vec<&str> = place_args.iter().map(String::as_str).collect();
        all.extend(args);
        Some(Server::spawn(backend, dir, framing, &all))
    }

    /// A server on a shared store, as a second process or after a restart.
    pub fn at(place: &Place, framing: Framing, args: &[&str]) -> Server {
        let place_args = place.args();
        let mut all: Vec<&str> = place_args.iter().map(String::as_str).collect();
        all.extend(args);
        Server::spawn(place.backend(), None, framing, &all)
    }

    /// A server on the database file `path`, as a second process or after a restart.
    pub fn on_file(path: &std::path::Path, framing: Framing, args: &[&str]) -> Server {
        let store = format!("sqlite:{}", path.display());
        Server::spawn(Backend::Sqlite, None, framing, &[&["--store", &store], args].concat())
    }

    /// As `on_file`, with the command adjusted by `prepare` first (a limit set in
    /// `pre_exec`, a working folder).
    pub fn on_file_with(
        path: &std::path::Path,
        framing: Framing,
        args: &[&str],
        prepare: impl FnOnce(&mut Command),
    ) -> Server {
        let store = format!("sqlite:{}", path.display());
        let mut command = Command::new(env!("CARGO_BIN_EXE_convo"));
        command.args(["--store", &store]).args(args);
        prepare(&mut command);
        Server::spawn_command(Backend::Sqlite, None, framing, command)
    }

    /// A server on a database file run by a command the test made itself (another copy of
    /// the binary, another user), its arguments given.
    pub fn from_command(command: Command, framing: Framing) -> Server {
        Server::spawn_command(Backend::Sqlite, None, framing, command)
    }

    fn spawn(backend: Backend, dir: Option<tempfile::TempDir>, framing: Framing, args: &[&str]) -> Server {
        let mut command = Command::new(env!("CARGO_BIN_EXE_convo"));
        command.args(args);
        Server::spawn_command(backend, dir, framing, command)
    }

    fn spawn_command(
        backend: Backend,
        dir: Option<tempfile::TempDir>,
        framing: Framing,
        mut command: Command,
    ) -> Server {
        let mut child =
            command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn convo");
        let stdout = child.stdout.take().unwrap();
        let (tx, replies) = mpsc::channel();
        std::thread::spawn(move || read_frames(BufReader::new(stdout), framing, tx));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Server {
            backend,
            _dir: dir,
            stdin: child.stdin.take(),
            child,
            replies,
            stderr,
            framing,
            next_id: 1,
            backlog: VecDeque::new(),
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).expect("write to convo");
        stdin.flush().unwrap();
    }

    /// Sends one JSON value as a frame.
    pub fn send(&mut self, message: &Value) {
        let frame = self.framing.encode(message.to_string().as_bytes());
        self.send_raw(&frame);
    }

    /// Sends a request and returns its id.
    pub fn send_request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// The next frame the server writes (or the oldest one passed over).
    pub fn recv(&mut self) -> Value {
        match self.backlog.pop_front() {
            Some(frame) => frame,
            None => self.pull(),
        }
    }

    /// The next frame from stdout itself.
    fn pull(&mut self) -> Value {
        match self.replies.recv_timeout(PATIENCE) {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => panic!("stdout held something that is not a frame: {e}\nstderr: {}", self.stderr()),
            Err(e) => panic!("no reply ({e:?}); passed over: {:?}\nstderr: {}", self.backlog, self.stderr()),
        }
    }

    /// The first frame, passed over before or still to come, that `wanted` accepts; the
    /// frames before it are kept for later calls.
    fn recv_matching(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(at) = self.backlog.iter().position(&wanted) {
            return self.backlog.remove(at).unwrap();
        }
        loop {
            let frame = self.pull();
            if wanted(&frame) {
                return frame;
            }
            self.backlog.push_back(frame);
        }
    }

    /// The next frame if one comes within `wait`.
    pub fn recv_within(&mut self, wait: Duration) -> Option<Value> {
        if let Some(frame) = self.backlog.pop_front() {
            return Some(frame);
        }
        match self.replies.recv_timeout(wait) {
            Ok(Ok(v)) => Some(v),
            Ok(Err(e)) => panic!("stdout held something that is not a frame: {e}"),
            Err(_) => None,
        }
    }

    /// Hands stdin over, to write from another thread.
    pub fn take_stdin(&mut self) -> ChildStdin {
        self.stdin.take().expect("stdin is open")
    }

    /// Asserts that the server writes nothing more for a moment, and that no frame was
    /// passed over.
    pub fn assert_silent(&mut self) {
        assert!(self.backlog.is_empty(), "frames left unread: {:?}", self.backlog);
        match self.replies.recv_timeout(Duration::from_millis(300)) {
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {}
            Ok(frame) => panic!("unexpected frame: {frame:?}"),
        }
    }

    /// Sends a request and returns the whole response, which must be the next response
    /// and carry its id (requests and notifications from the server are passed over).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        let reply = self.recv_matching(|frame| frame.get("method").is_none());
        assert_eq!(reply["id"], json!(id), "reply to another request: {reply}");
        assert_eq!(reply["jsonrpc"], "2.0");
        reply
    }

    /// Calls a method that must succeed; returns its result, checked against the spec.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let reply = self.request(method, params);
        succeeded(method, &reply)
    }

    /// Calls a method that must fail; returns the error object, checked against the spec.
    pub fn fail(&mut self, method: &str, params: Value, code: i64) -> Value {
        let reply = self.request(method, params);
        failed(method, &reply, code)
    }

    /// The response to the client's request `id`, whenever it comes.
    pub fn recv_reply(&mut self, id: u64) -> Value {
        let reply = self.recv_matching(|frame| frame.get("method").is_none() && frame["id"] == json!(id));
        assert_eq!(reply["jsonrpc"], "2.0");
        reply
    }

    /// The result of the request `id` to `method`, which must succeed; checked against
    /// the spec.
    pub fn result_of(&mut self, id: u64, method: &str) -> Value {
        let reply = self.recv_reply(id);
        succeeded(method, &reply)
    }

    /// The error of the request `id` to `method`, which must fail with `code`; checked
    /// against the spec.
    pub fn error_of(&mut self, id: u64, method: &str, code: i64) -> Value {
        let reply = self.recv_reply(id);
        failed(method, &reply, code)
    }

    /// The server's process id, to read its figures from /proc.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Closes stdin and waits for the process to end.
    pub fn finish(&mut self) -> ExitStatus {
        self.close_stdin();
        self.wait()
    }

    pub fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "convo did not exit; stderr: {}", self.stderr());
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Every frame still to come (after those passed over), until stdout closes.
    pub fn drain(&mut self) -> Vec<Value> {
        let mut out: Vec<Value> = self.backlog.drain(..).collect();
        loop {
            match self.replies.recv_timeout(PATIENCE) {
                Ok(Ok(v)) => out.push(v),
                Ok(Err(e)) => panic!("stdout held something that is not a frame: {e}"),
                Err(RecvTimeoutError::Disconnected) => return out,
                Err(RecvTimeoutError::Timeout) => panic!("stdout did not close"),
            }
        }
    }
}

/// The client as the host runtime: it answers convo's requests and sends it notifications
/// (issue 10).
impl Server {
    /// The request for `method` that the client's request `id` makes the server send: the
    /// next request or notification from the server, which must come before the reply to
    /// `id` and be a request for `method` with an object as params and a string id
    /// `convo:<n>`, n counting from 1. Replies to other requests are kept for later calls.
    pub fn host_request(&mut self, id: u64, method: &str) -> Value {
        let frame = self.recv_matching(|frame| frame.get("method").is_some() || frame["id"] == json!(id));
        assert!(frame.get("method").is_some(), "answered without asking for {method}: {frame}");
        server_request(frame, method)
    }

    /// The next request or notification from the server, which must be a notification
    /// for `method`; returns its params. Replies that come first are kept for later calls.
    pub fn host_notification(&mut self, method: &str) -> Value {
        let frame = self.recv_matching(|frame| frame.get("method").is_some());
        assert_eq!(frame["jsonrpc"], "2.0", "{frame}");
        assert_eq!(frame["method"], method, "another notification or a request came first: {frame}");
        assert!(frame.get("id").is_none(), "a notification has no id: {frame}");
        assert!(documented("x-notifications", method), "{method} is not in protocol/openrpc.json's x-notifications");
        frame["params"].clone()
    }

    /// Answers the server's request `id` with `result`.
    pub fn answer(&mut self, id: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    /// Answers the server's request `id` with the error object `error`, sent as given.
    pub fn answer_error(&mut self, id: &Value, error: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "error": error}));
    }
}

impl Server {
    /// Ends the process at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Reads the server's stdout strictly: exactly `Content-Length: N\r\n\r\n` then N bytes
/// (LSP), or one JSON value per line (NDJSON).
fn read_frames(mut out: impl BufRead, framing: Framing, tx: mpsc::Sender<Result<Value, String>>) {
    loop {
        let body = match framing {
            Framing::Ndjson => {
                let mut line = Vec::new();
                match out.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) if line.last() != Some(&b'\n') => Err(format!("unterminated line {line:?}")),
                    Ok(_) => Ok(line),
                }
            }
            Framing::Lsp => {
                let mut header = Vec::new();
                match out.read_until(b'\n', &mut header) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => lsp_body(&mut out, &header),
                }
            }
        };
        let parsed = body.and_then(|b| serde_json::from_slice(&b).map_err(|e| format!("{e}: {b:?}")));
        if tx.send(parsed).is_err() {
            return;
        }
    }
}

fn lsp_body(out: &mut impl BufRead, header: &[u8]) -> Result<Vec<u8>, String> {
    let text = std::str::from_utf8(header).map_err(|e| e.to_string())?;
    let n: usize = text
        .strip_prefix("Content-Length: ")
        .and_then(|t| t.strip_suffix("\r\n"))
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| format!("bad header line {text:?}"))?;
    let mut blank = [0; 2];
    out.read_exact(&mut blank).map_err(|e| e.to_string())?;
    if &blank != b"\r\n" {
        return Err(format!("header not followed by CRLF: {blank:?}"));
    }
    let mut body = vec![0; n];
    out.read_exact(&mut body).map_err(|e| e.to_string())?;
    Ok(body)
}

/// protocol/openrpc.json, read once.
pub fn openrpc() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/protocol/openrpc.json");
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).expect("openrpc.json is JSON")
    })
}

/// A validator for `schema`, with `#/components/...` references resolved in openrpc.json.
fn validator(schema: &Value) -> jsonschema::Validator {
    let root = json!({"components": openrpc()["components"], "allOf": [schema]});
    jsonschema::validator_for(&root).expect("a valid schema")
}

fn check(what: &str, schema: &Value, instance: &Value) {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<jsonschema::Validator>>>> = OnceLock::new();
    let key = schema.to_string();
    let v = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .entry(key)
        .or_insert_with(|| Arc::new(validator(schema)))
        .clone();
    let errors: Vec<String> = v.iter_errors(instance).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    assert!(errors.is_empty(), "{what} does not match protocol/openrpc.json: {errors:#?}\n{instance}");
}

/// A frame from the server that must be a request for `method` with an object as params
/// and a string id `convo:<n>`.
fn server_request(frame: Value, method: &str) -> Value {
    assert_eq!(frame["jsonrpc"], "2.0", "{frame}");
    assert_eq!(frame["method"], method, "another request or a notification came first: {frame}");
    let id = frame["id"].as_str().unwrap_or_else(|| panic!("a server request has a string id: {frame}"));
    let n = id.strip_prefix("convo:").and_then(|n| n.parse::<u64>().ok());
    assert!(n.is_some_and(|n| n >= 1), "the id of a server request is convo:<n>: {frame}");
    assert!(frame["params"].is_object(), "{frame}");
    assert!(documented("x-server-requests", method), "{method} is not in protocol/openrpc.json's x-server-requests");
    frame
}

/// Whether protocol/openrpc.json lists `name` in its extension `section`.
fn documented(section: &str, name: &str) -> bool {
    openrpc()[section].as_array().is_some_and(|list| list.iter().any(|entry| entry["name"] == name))
}

/// The result of a response that must be a success, checked against the spec.
fn succeeded(method: &str, reply: &Value) -> Value {
    assert!(reply.get("error").is_none(), "{method} failed: {reply}");
    let result = reply.get("result").unwrap_or_else(|| panic!("{method}: a response without a result: {reply}"));
    check_result(method, result);
    result.clone()
}

/// The error of a response that must fail with `code`, checked against the spec.
fn failed(method: &str, reply: &Value, code: i64) -> Value {
    let error = reply.get("error").unwrap_or_else(|| panic!("{method} should fail with {code}: {reply}")).clone();
    assert_eq!(error["code"], json!(code), "{method}: {error}");
    check_error(&error);
    error
}

pub fn check_result(method: &str, result: &Value) {
    let spec = openrpc()["methods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == method)
        .unwrap_or_else(|| panic!("{method} is not in protocol/openrpc.json"));
    check(&format!("the result of {method}"), &spec["result"]["schema"], result);
}

pub fn check_error(error: &Value) {
    let code = &error["code"];
    let spec = openrpc()["components"]["errors"]
        .as_object()
        .unwrap()
        .values()
        .find(|e| &e["code"] == code)
        .unwrap_or_else(|| panic!("error code {code} is not in protocol/openrpc.json"));
    assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()), "{error}");
    if let Some(data) = spec.get("data") {
        check(&format!("the data of error {code}"), data, &error["data"]);
    }
}

/// Runs each named `fn(&mut Server)` as two tests, one per framing, on the memory store.
#[macro_export]
macro_rules! both_framings {
    ($($test:ident),* $(,)?) => {
        mod over_lsp {
            $(#[test] fn $test() { super::$test(&mut $crate::harness::Server::start($crate::harness::Framing::Lsp)) })*
        }
        mod over_ndjson {
            $(#[test] fn $test() { super::$test(&mut $crate::harness::Server::start($crate::harness::Framing::Ndjson)) })*
        }
    };
}

/// The store contract: runs each named `fn(&mut Server)` on every backend, in both
/// framings.
#[macro_export]
macro_rules! every_store {
    ($($test:ident),* $(,)?) => {
        $crate::every_store!(@one memory_lsp, Memory, Lsp; $($test),*);
        $crate::every_store!(@one memory_ndjson, Memory, Ndjson; $($test),*);
        $crate::every_store!(@one sqlite_lsp, Sqlite, Lsp; $($test),*);
        $crate::every_store!(@one sqlite_ndjson, Sqlite, Ndjson; $($test),*);
        $crate::every_store!(@one postgres_ndjson, Postgres, Ndjson; $($test),*);
    };
    (@one $module:ident, $backend:ident, $framing:ident; $($test:ident),*) => {
        mod $module {
            $(#[test] fn $test() {
                if let Some(mut server) = $crate::harness::Server::on_maybe(
                    $crate::harness::Backend::$backend,
                    $crate::harness::Framing::$framing,
                    &[],
                ) {
                    super::$test(&mut server)
                }
            })*
        }
    };
}
