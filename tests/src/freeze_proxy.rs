//! A TCP proxy in front of the API server that can hold back everything the
//! server sends (a "frozen" proxy), while counting what clients send
//! meanwhile. It sees only bytes (the connections are TLS end to end), which
//! is enough to make a client's watch deliver late: an event the server sent
//! while frozen reaches the client only after [`FreezeProxy::thaw`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Result;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The running proxy. Stops accepting and forwarding when dropped.
#[derive(Debug)]
pub struct FreezeProxy {
    addr: SocketAddr,
    frozen: watch::Sender<bool>,
    sent_while_frozen: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl FreezeProxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (frozen, _) = watch::channel(false);
        let sent_while_frozen = Arc::new(AtomicU64::new(0));
        let (tx, counter) = (frozen.clone(), sent_while_frozen.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (rx, counter) = (tx.subscribe(), counter.clone());
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(upstream).await {
                        forward(client, server, rx, counter).await;
                    }
                });
            }
        });
        Ok(FreezeProxy {
            addr,
            frozen,
            sent_while_frozen,
            task,
        })
    }

    /// `https://127.0.0.1:<port>` of the proxy.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// From now on, nothing the server sends reaches any client.
    pub fn freeze(&self) {
        self.sent_while_frozen.store(0, Ordering::SeqCst);
        self.frozen.send_replace(true);
    }

    /// Delivers what was held back and forwards freely again.
    pub fn thaw(&self) {
        self.frozen.send_replace(false);
    }

    /// Bytes clients sent since the last [`freeze`](Self::freeze) while frozen.
    pub fn sent_while_frozen(&self) -> u64 {
        self.sent_while_frozen.load(Ordering::SeqCst)
    }
}

impl Drop for FreezeProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn forward(
    client: TcpStream,
    server: TcpStream,
    mut frozen: watch::Receiver<bool>,
    counter: Arc<AtomicU64>,
) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let frozen_up = frozen.clone();
    let up = async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if *frozen_up.borrow() {
                counter.fetch_add(n as u64, Ordering::SeqCst);
            }
            if server_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = server_write.shutdown().await;
    };
    let down = async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match server_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            // Hold the bytes while frozen.
            if frozen.wait_for(|f| !*f).await.is_err() {
                break;
            }
            if client_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = client_write.shutdown().await;
    };
    tokio::join!(up, down);
}
