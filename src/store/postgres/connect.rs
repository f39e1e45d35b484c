//! From `--store postgres://…` to connections: the URL (with the libpq parameters
//! tokio-postgres does not read: `sslmode=verify-ca|verify-full`, `sslrootcert`; and
//! convo's own: `pool_max`, `listen_url`), the password from `PGPASSWORD` or a `.pgpass`
//! file when the URL has none, TLS through rustls, and URLs shown with the password
//! masked. Nothing is set through the startup `options` (a pooler refuses them).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject as _};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{Error, Result};

/// Where to connect, parsed and ready, and the URL to show.
#[derive(Clone)]
pub struct Target {
    pub config: tokio_postgres::Config,
    pub tls: MakeRustlsConnect,
    /// The URL with its password masked.
    pub shown: String,
    /// `pool_max=`: the connections that serve requests, at most.
    pub pool_max: usize,
    /// `listen_url=`: a direct connection (not through a pooler) for LISTEN.
    pub listen: Option<Box<Target>>,
}

/// Connections that serve requests unless `pool_max=` says otherwise.
pub const DEFAULT_POOL_MAX: usize = 4;

/// The store's own name for the URL in messages: the password replaced by `***`, and so
/// in a `listen_url=` parameter's URL (shown decoded).
pub fn mask(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let tail = match tail.split_once('?') {
        Some((path, query)) if query.contains("listen_url=") => {
            let pairs: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some(("listen_url", value)) => format!("listen_url={}", mask(&percent_decode(value))),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", pairs.join("&"))
        }
        _ => tail.to_owned(),
    };
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => format!("{scheme}://{authority}{tail}"),
        },
        None => format!("{scheme}://{authority}{tail}"),
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|b| (*b as char).to_digit(16));
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (hex(i + 1), hex(i + 2))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub fn parse(url: &str) -> Result<Target> {
    let shown = mask(url);
    let bad = |why: String| Error::StorageUnavailable(format!("{shown}: {why}"));
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let (mut kept, mut verify, mut root_cert) = (Vec::new(), false, None::<PathBuf>);
    let (mut pool_max, mut listen) = (DEFAULT_POOL_MAX, None);
    let mut mode = SslMode::Prefer;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "pool_max" => {
                pool_max = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=1000).contains(n))
                    .ok_or_else(|| bad(format!("pool_max must be a number from 1 to 1000, not {value:?}")))?;
            }
            "listen_url" => {
                let direct = percent_decode(value);
                if direct.contains("listen_url=") {
                    return Err(bad("listen_url names a URL with a listen_url of its own".into()));
                }
                listen = Some(Box::new(parse(&direct)?));
            }
            "sslmode" => {
                (mode, verify) = match value {
                    "disable" => (SslMode::Disable, false),
                    "allow" | "prefer" => (SslMode::Prefer, false),
                    "require" => (SslMode::Require, false),
                    "verify-ca" | "verify-full" => (SslMode::Require, true),
                    other => return Err(bad(format!("unknown sslmode {other:?}"))),
                }
            }
            "sslrootcert" => root_cert = Some(PathBuf::from(percent_decode(value))),
            _ => kept.push(pair),
        }
    }
    let rebuilt = if kept.is_empty() { base.to_owned() } else { format!("{base}?{}", kept.join("&")) };
    let mut config: tokio_postgres::Config = rebuilt.parse().map_err(|e| bad(format!("not a PostgreSQL URL: {e}")))?;
    config.ssl_mode(mode);
    if config.get_application_name().is_none() {
        config.application_name("convo");
    }
    if config.get_password().is_none()
        && let Some(password) = password_from_environment(&config)
    {
        config.password(password);
    }
    let tls = tls(verify, root_cert.as_deref()).map_err(bad)?;
    Ok(Target { config, tls, shown, pool_max, listen })
}

/// `PGPASSWORD`, else the first matching line of `PGPASSFILE` or libpq's default file:
/// `~/.pgpass` (ignored, as libpq does, when others can read it), on Windows
/// `%APPDATA%\postgresql\pgpass.conf`.
fn password_from_environment(config: &tokio_postgres::Config) -> Option<String> {
    if let Ok(password) = std::env::var("PGPASSWORD") {
        return Some(password);
    }
    let file = std::env::var_os("PGPASSFILE").map(PathBuf::from).or_else(|| {
        let dirs = directories::BaseDirs::new()?;
        Some(if cfg!(windows) {
            dirs.config_dir().join("postgresql").join("pgpass.conf")
        } else {
            dirs.home_dir().join(".pgpass")
        })
    })?;
    pgpass_lookup(&file, config)
}

fn pgpass_lookup(file: &Path, config: &tokio_postgres::Config) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let meta = std::fs::metadata(file).ok()?;
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(file = %file.display(), "password file has group or world access; ignored");
            return None;
        }
    }
    let text = std::fs::read_to_string(file).ok()?;
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(Host::Unix(_)) => "localhost".to_owned(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432).to_string();
    let user = config.get_user().unwrap_or_default().to_owned();
    let db = config.get_dbname().map_or_else(|| user.clone(), str::to_owned);
    let wanted = [host, port, db, user];
    text.lines().filter(|l| !l.starts_with('#')).find_map(|line| {
        let fields = split_pgpass(line);
        let [h, p, d, u, password] = <[String; 5]>::try_from(fields).ok()?;
        [h, p, d, u].iter().zip(&wanted).all(|(pattern, value)| pattern == "*" || pattern == value).then_some(password)
    })
}

/// A `.pgpass` line's five fields: `:` separates, `\` escapes.
fn split_pgpass(line: &str) -> Vec<String> {
    let (mut fields, mut field, mut chars) = (Vec::new(), String::new(), line.chars());
    while let Some(c) = chars.next() {
        match c {
            '\\' => field.extend(chars.next()),
            ':' if fields.len() < 4 => fields.push(std::mem::take(&mut field)),
            c => field.push(c),
        }
    }
    fields.push(field);
    fields
}

fn tls(verify: bool, root_cert: Option<&Path>) -> std::result::Result<MakeRustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let config = if verify {
        let mut roots = rustls::RootCertStore::empty();
        match root_cert {
            Some(path) => {
                for cert in
                    CertificateDer::pem_file_iter(path).map_err(|e| format!("sslrootcert {}: {e}", path.display()))?
                {
                    let cert = cert.map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
                    roots.add(cert).map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                for cert in found.certs {
                    let _ = roots.add(cert);
                }
                if roots.is_empty() {
                    return Err("sslmode=verify-full: no system root certificates found; give sslrootcert".into());
                }
            }
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    } else {
        // libpq's `require` (and `prefer`): encrypted, the certificate not checked.
        builder.dangerous().with_custom_certificate_verifier(Arc::new(Unchecked(provider))).with_no_client_auth()
    };
    Ok(MakeRustlsConnect::new(config))
}

/// Accepts any server certificate while still checking the handshake's signatures, as
/// libpq does for `sslmode=require`.
#[derive(Debug)]
struct Unchecked(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_the_password_only() {
        assert_eq!(mask("postgres://u:secret@h:5432/db?sslmode=require"), "postgres://u:***@h:5432/db?sslmode=require");
        assert_eq!(mask("postgresql://u@h/db"), "postgresql://u@h/db");
        assert_eq!(mask("postgres://h/db"), "postgres://h/db");
        assert_eq!(mask("postgres://u:p%40ss@h/db"), "postgres://u:***@h/db");
        assert_eq!(
            mask("postgres://u:a@h:6432/db?pool_max=2&listen_url=postgres%3A%2F%2Fu%3Ab%40h%2Fdb"),
            "postgres://u:***@h:6432/db?pool_max=2&listen_url=postgres://u:***@h/db"
        );
    }

    #[test]
    fn reads_the_libpq_parameters_tokio_postgres_does_not() {
        let t = parse("postgres://u:p@localhost:5433/db?sslmode=verify-full&sslrootcert=%2Fnone").err();
        let message = t.map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("sslrootcert /none"), "{message}");
        assert!(!message.contains(":p@"), "{message}");
        let t = parse("postgres://u:p@localhost:5433/db?sslmode=require&application_name=x").ok().unwrap();
        assert_eq!(t.config.get_ssl_mode(), SslMode::Require);
        assert_eq!(t.config.get_application_name(), Some("x"));
        assert_eq!(t.config.get_options(), None, "a pooler refuses startup options");
        assert_eq!((t.pool_max, t.listen.is_none()), (DEFAULT_POOL_MAX, true));
    }

    #[test]
    fn reads_pool_max_and_listen_url() {
        let url =
            "postgres://u:p@127.0.0.1:6432/db?pool_max=2&listen_url=postgres%3A%2F%2Fu%3Ap%40127.0.0.1%3A5432%2Fdb";
        let t = parse(url).ok().unwrap();
        assert_eq!(t.pool_max, 2);
        let listen = t.listen.expect("a listen target");
        assert_eq!(listen.config.get_ports(), [5432]);
        assert_eq!(listen.shown, "postgres://u:***@127.0.0.1:5432/db");
        assert!(!t.shown.contains(":p@"), "{}", t.shown);
        let refused = parse("postgres://u@h/db?pool_max=0").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(refused.contains("pool_max must be a number from 1 to 1000"), "{refused}");
    }

    #[test]
    fn pgpass_lines_split_on_unescaped_colons() {
        assert_eq!(split_pgpass(r"h:5432:db:u:pa\:ss:word"), ["h", "5432", "db", "u", "pa:ss:word"]);
        assert_eq!(split_pgpass(r"*:*:*:*:x\\y"), ["*", "*", "*", "*", r"x\y"]);
    }
}
