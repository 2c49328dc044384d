//! The HTTP/2 flow-control settings of every connection that carries these messages, client
//! and server side alike. The defaults (a 1 MiB connection window on a server, 16 KiB frames)
//! hold a file transfer back: four parts of 512 KiB in flight overrun the window and wait for
//! WINDOW_UPDATEs, and each part is cut into 32 frames. Windows only bound what a peer may
//! send before it is read, so larger ones cost no memory on an idle connection.

/// Bytes one stream may send before its receiver acknowledges them.
pub const STREAM_WINDOW: u32 = 4 * 1024 * 1024;
/// Bytes all streams of a connection may send before their receiver acknowledges them.
pub const CONNECTION_WINDOW: u32 = 16 * 1024 * 1024;
/// Largest frame a side accepts: a 512 KiB part is two frames.
pub const MAX_FRAME: u32 = 256 * 1024;
