//! The trace stream's wire format at the runsc this crate is pinned to
//! (Debian bookworm's 0.0~20221219.0): the handshake, each message's
//! header, and the few point messages the reader reads, written after
//! gVisor's `pkg/sentry/seccheck/points/{common,syscall}.proto`.
//!
//! Only the fields the reader uses are declared; prost skips the others,
//! as protobuf's compatibility rules want. Text fields that the protos
//! declare `string` are read as bytes (the wire type is the same) so that a
//! path that is not UTF-8 costs one replacement character, not the whole
//! message.

/// The handshake each side sends once, before any point: runsc sends its
/// version, the reader answers with its own (runsc requires at least 1).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Handshake {
    #[prost(uint32, tag = "1")]
    pub version: u32,
}

/// The version the reader answers the handshake with.
pub(crate) const READER_VERSION: u32 = 1;

/// What the sandbox adds to each point about the task that caused it (only
/// the context fields the pod init config asks for are filled).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ContextData {
    /// Wall clock time of the point, in nanoseconds since the epoch.
    #[prost(int64, tag = "1")]
    pub time_ns: i64,
    /// The task's working directory.
    #[prost(bytes = "vec", tag = "8")]
    pub cwd: Vec<u8>,
}

/// A system call's result; present on `exit` points only.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Exit {
    #[prost(int64, tag = "1")]
    pub result: i64,
    /// The errno, 0 on success.
    #[prost(int64, tag = "2")]
    pub errorno: i64,
}

/// A raw system call point (`syscall/sysno/N/...`): the number and the six
/// register arguments, never what they point to.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Syscall {
    #[prost(message, optional, tag = "1")]
    pub context_data: Option<ContextData>,
    #[prost(message, optional, tag = "2")]
    pub exit: Option<Exit>,
    #[prost(uint64, tag = "4")]
    pub sysno: u64,
    #[prost(uint64, tag = "5")]
    pub arg1: u64,
    #[prost(uint64, tag = "6")]
    pub arg2: u64,
    #[prost(uint64, tag = "7")]
    pub arg3: u64,
    #[prost(uint64, tag = "8")]
    pub arg4: u64,
    #[prost(uint64, tag = "9")]
    pub arg5: u64,
    #[prost(uint64, tag = "10")]
    pub arg6: u64,
}

/// `open`, `openat` and `creat`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Open {
    #[prost(message, optional, tag = "1")]
    pub context_data: Option<ContextData>,
    #[prost(message, optional, tag = "2")]
    pub exit: Option<Exit>,
    #[prost(uint64, tag = "3")]
    pub sysno: u64,
    /// `openat`'s directory descriptor (`AT_FDCWD` for the others).
    #[prost(int64, tag = "4")]
    pub fd: i64,
    /// The directory `fd` names, when the `fd_path` field is asked for.
    #[prost(bytes = "vec", tag = "5")]
    pub fd_path: Vec<u8>,
    #[prost(bytes = "vec", tag = "6")]
    pub pathname: Vec<u8>,
    #[prost(uint32, tag = "7")]
    pub flags: u32,
    #[prost(uint32, tag = "8")]
    pub mode: u32,
}

/// `connect`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Connect {
    #[prost(message, optional, tag = "1")]
    pub context_data: Option<ContextData>,
    #[prost(message, optional, tag = "2")]
    pub exit: Option<Exit>,
    #[prost(uint64, tag = "3")]
    pub sysno: u64,
    /// The `sockaddr` as the program passed it.
    #[prost(bytes = "vec", tag = "6")]
    pub address: Vec<u8>,
}

/// `execve` and `execveat`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Execve {
    #[prost(message, optional, tag = "1")]
    pub context_data: Option<ContextData>,
    #[prost(message, optional, tag = "2")]
    pub exit: Option<Exit>,
    #[prost(uint64, tag = "3")]
    pub sysno: u64,
    /// `execveat`'s directory descriptor (0, unset, for `execve`).
    #[prost(int64, tag = "4")]
    pub fd: i64,
    #[prost(bytes = "vec", tag = "5")]
    pub fd_path: Vec<u8>,
    #[prost(bytes = "vec", tag = "6")]
    pub pathname: Vec<u8>,
    #[prost(bytes = "vec", repeated, tag = "7")]
    pub argv: Vec<Vec<u8>>,
    /// `execveat`'s flags (`AT_EMPTY_PATH`, ...).
    #[prost(uint32, tag = "9")]
    pub flags: u32,
}

/// `socket`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Socket {
    #[prost(message, optional, tag = "1")]
    pub context_data: Option<ContextData>,
    #[prost(message, optional, tag = "2")]
    pub exit: Option<Exit>,
    #[prost(uint64, tag = "3")]
    pub sysno: u64,
    #[prost(int32, tag = "4")]
    pub domain: i32,
    #[prost(int32, tag = "5")]
    pub socket_type: i32,
    #[prost(int32, tag = "6")]
    pub protocol: i32,
}

/// `clone`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Clone {
    #[prost(message, optional, tag = "1")]
    pub context_data: Option<ContextData>,
    #[prost(message, optional, tag = "2")]
    pub exit: Option<Exit>,
    #[prost(uint64, tag = "3")]
    pub sysno: u64,
    #[prost(uint64, tag = "4")]
    pub flags: u64,
}

/// `bind`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Bind {
    #[prost(message, optional, tag = "1")]
    pub context_data: Option<ContextData>,
    #[prost(message, optional, tag = "2")]
    pub exit: Option<Exit>,
    #[prost(uint64, tag = "3")]
    pub sysno: u64,
    #[prost(bytes = "vec", tag = "6")]
    pub address: Vec<u8>,
}

/// `fork` and `vfork` (gVisor sends both as this message).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Fork {
    #[prost(message, optional, tag = "1")]
    pub context_data: Option<ContextData>,
    #[prost(message, optional, tag = "2")]
    pub exit: Option<Exit>,
    #[prost(uint64, tag = "3")]
    pub sysno: u64,
}

/// `MessageType` values of the messages above (common.proto).
pub(crate) mod message_type {
    pub const SYSCALL_RAW: u16 = 6;
    pub const SYSCALL_OPEN: u16 = 7;
    pub const SYSCALL_CONNECT: u16 = 10;
    pub const SYSCALL_EXECVE: u16 = 11;
    pub const SYSCALL_SOCKET: u16 = 12;
    pub const SYSCALL_CLONE: u16 = 23;
    pub const SYSCALL_BIND: u16 = 24;
    pub const SYSCALL_FORK: u16 = 29;
}

/// The size of the header as runsc writes it now; a later version may
/// send a longer one, whose payload starts at its `header_size`.
pub(crate) const HEADER_SIZE: usize = 8;

/// The header before each point's payload (little endian, as runsc
/// marshals it on amd64).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    /// Where the payload starts.
    pub header_size: u16,
    /// What the payload is ([`message_type`]).
    pub message_type: u16,
    /// How many points the sandbox failed to send so far (wraps).
    pub dropped_count: u32,
}

/// Why a message has no usable header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BadHeader {
    /// The message is shorter than the fixed header.
    Short { length: usize },
    /// `header_size` is below the fixed header's size.
    TooSmall { header_size: u16 },
    /// `header_size` runs past the message's end.
    PastEnd { header_size: u16, length: usize },
}

impl std::fmt::Display for BadHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadHeader::Short { length } => write!(
                f,
                "a trace message of {length} bytes is shorter than its {HEADER_SIZE}-byte header"
            ),
            BadHeader::TooSmall { header_size } => write!(
                f,
                "a trace message's header says it is {header_size} bytes, less than {HEADER_SIZE}"
            ),
            BadHeader::PastEnd {
                header_size,
                length,
            } => write!(
                f,
                "a trace message's header says it is {header_size} bytes, \
                 longer than the {length}-byte message"
            ),
        }
    }
}

impl Header {
    /// The header of `message` and the payload after it.
    pub fn split(message: &[u8]) -> Result<(Header, &[u8]), BadHeader> {
        let length = message.len();
        let Some(fixed) = message.first_chunk::<HEADER_SIZE>() else {
            return Err(BadHeader::Short { length });
        };
        let header = Header {
            header_size: u16::from_le_bytes([fixed[0], fixed[1]]),
            message_type: u16::from_le_bytes([fixed[2], fixed[3]]),
            dropped_count: u32::from_le_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]),
        };
        let header_size = header.header_size;
        if usize::from(header_size) < HEADER_SIZE {
            return Err(BadHeader::TooSmall { header_size });
        }
        match message.get(usize::from(header_size)..) {
            Some(payload) => Ok((header, payload)),
            None => Err(BadHeader::PastEnd {
                header_size,
                length,
            }),
        }
    }

    /// The header's bytes, as runsc writes them.
    #[cfg(test)]
    pub fn to_bytes(self) -> [u8; HEADER_SIZE] {
        let mut bytes = [0; HEADER_SIZE];
        bytes[0..2].copy_from_slice(&self.header_size.to_le_bytes());
        bytes[2..4].copy_from_slice(&self.message_type.to_le_bytes());
        bytes[4..8].copy_from_slice(&self.dropped_count.to_le_bytes());
        bytes
    }
}
