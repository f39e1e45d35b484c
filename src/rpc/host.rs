//! The host as `ops` sees it (`ops::Host`), over this connection: `runtime/run` and
//! `runtime/stream` are server → client requests through `Peer`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::ops::{Failure, Host, RuntimeParams};
use crate::rpc::peer::Peer;

pub struct PeerHost(pub Arc<Peer>);

#[async_trait]
impl Host for PeerHost {
    async fn run(
        &self,
        params: &RuntimeParams,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<Value, Failure> {
        self.0.request("runtime/run", params, timeout, cancel).await
    }

    async fn stream(
        &self,
        params: &RuntimeParams,
        timeout: Duration,
        cancel: &CancellationToken,
        deltas: mpsc::Sender<Value>,
    ) -> Result<Value, Failure> {
        let stream_id = params.stream_id.clone().unwrap_or_default();
        let mut incoming = self.0.deltas(&stream_id);
        let asked = self.0.request("runtime/stream", params, timeout, cancel);
        tokio::pin!(asked);
        loop {
            tokio::select! {
                biased;
                Some(delta) = incoming.rx.recv() => {
                    let _ = deltas.send(delta).await;
                }
                answer = &mut asked => {
                    // Deltas sent before the answer arrived come first.
                    while let Ok(delta) = incoming.rx.try_recv() {
                        let _ = deltas.send(delta).await;
                    }
                    return answer;
                }
            }
        }
    }
}
