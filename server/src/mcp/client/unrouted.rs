//! An HTTP session the server no longer knows: a server restarted (or one that expired the
//! session) answers our requests with a JSON-RPC error that carries no id (server-everything's
//! "Bad Request: No valid session ID provided"), which rmcp cannot route to the waiting request,
//! so the call would wait for its timeout. This transport ends the session at such an error
//! instead, keeping the message: the request was refused, not run, and may be sent again on a
//! new session.

use std::future::Future;
use std::sync::{Arc, Mutex};

use rmcp::RoleClient;
use rmcp::model::{JsonRpcError, JsonRpcMessage};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

pub struct EndOnUnroutedError<T> {
    inner: T,
    /// The id-less error's message, once one came.
    pub rejected: Arc<Mutex<Option<String>>>,
}

impl<T> EndOnUnroutedError<T> {
    pub fn new(inner: T) -> Self {
        Self {
            inner,
            rejected: Arc::default(),
        }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for EndOnUnroutedError<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await?;
        if let JsonRpcMessage::Error(JsonRpcError {
            error, id: None, ..
        }) = &message
        {
            tracing::debug!(
                "the server refused a request without saying which: {}",
                error.message
            );
            *self.rejected.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(error.message.to_string());
            return None;
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
