//! The client's Media service: svc-media's calls, with the owner set to the caller's user.
//! svc-media takes the client's requests and gives its answers as they are: each RPC passes
//! the request on beside its owner and the answer back.

use std::sync::Arc;

use oxigram_errors::forward;
use oxigram_proto::{
    api::v1::{
        CompleteUploadRequest, File, FileChunk, GetFileRequest, SaveFilePartRequest,
        SaveFilePartResponse, media_server::Media,
    },
    media::v1 as media_svc,
};
use tonic::{Request, Response, Status};

use crate::{Gateway, acting::Acting};

pub struct MediaApi(pub Arc<Gateway>);

/// Each `$method`: the client's `$request` goes to svc-media's `$method` in svc-media's own
/// request of that name, owned by the caller; svc-media's `$answer` comes back as it is.
macro_rules! pass_on {
    ($($method:ident($request:ident) -> $answer:ty;)*) => {
        #[tonic::async_trait]
        impl Media for MediaApi {
            $(
                async fn $method(
                    &self,
                    request: Request<$request>,
                ) -> Result<Response<$answer>, Status> {
                    let (me, request) = self.0.signed_in(request).await?;
                    let request = media_svc::$request::acting(me, request);
                    self.0.media.clone().$method(request).await.map_err(forward)
                }
            )*
        }
    };
}

pass_on! {
    save_file_part(SaveFilePartRequest) -> SaveFilePartResponse;
    complete_upload(CompleteUploadRequest) -> File;
    get_file(GetFileRequest) -> FileChunk;
}
