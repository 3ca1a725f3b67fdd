//! The NBD wire format, sans I/O: the numbers of the protocol (fixed newstyle handshake and
//! simple replies, as in the NBD project's proto.md), request parsing and message encoding.
//! Nothing here reads or writes a socket.

/// "NBDMAGIC": the server's first eight bytes.
pub const INIT_MAGIC: u64 = 0x4e42_444d_4147_4943;
/// "IHAVEOPT": newstyle negotiation, and the magic of every option the client sends.
pub const OPTS_MAGIC: u64 = 0x4948_4156_454f_5054;
/// Magic of an option reply.
pub const REP_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Magic of a transmission request.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Magic of a simple reply.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;

/// Handshake flags (server): fixed newstyle, and the 124 zero bytes may be left out.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flags: the same two bits; anything else is unknown and ends the handshake.
pub const CLIENT_FIXED_NEWSTYLE: u32 = 1 << 0;
pub const CLIENT_NO_ZEROES: u32 = 1 << 1;

/// Transmission flags.
pub const TX_HAS_FLAGS: u16 = 1 << 0;
pub const TX_READ_ONLY: u16 = 1 << 1;
pub const TX_SEND_FLUSH: u16 = 1 << 2;
pub const TX_SEND_FUA: u16 = 1 << 3;
pub const TX_SEND_TRIM: u16 = 1 << 5;
pub const TX_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const TX_CAN_MULTI_CONN: u16 = 1 << 8;

/// Options.
pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_STARTTLS: u32 = 5;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;

/// Option reply types.
pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
const REP_ERR: u32 = 1 << 31;
pub const REP_ERR_UNSUP: u32 = REP_ERR | 1;
pub const REP_ERR_POLICY: u32 = REP_ERR | 2;
pub const REP_ERR_INVALID: u32 = REP_ERR | 3;
pub const REP_ERR_UNKNOWN: u32 = REP_ERR | 6;

/// Information types of `NBD_OPT_INFO`/`NBD_OPT_GO`.
pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_DESCRIPTION: u16 = 2;
pub const INFO_BLOCK_SIZE: u16 = 3;

/// Commands.
pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_WRITE_ZEROES: u16 = 6;

/// Command flag: the write must be durable before the reply. (`NO_HOLE` needs nothing:
/// zeroes are always written, never punched.)
pub const CMD_FLAG_FUA: u16 = 1 << 0;

/// Error values of replies (the protocol's subset of errno).
pub const EPERM: u32 = 1;
pub const EIO: u32 = 5;
pub const ENOMEM: u32 = 12;
pub const EINVAL: u32 = 22;
pub const ENOSPC: u32 = 28;
pub const EOVERFLOW: u32 = 75;
pub const ENOTSUP: u32 = 95;
pub const ESHUTDOWN: u32 = 108;

/// Bytes of a transmission request header.
pub const REQUEST_LEN: usize = 28;

/// Largest option payload a client may send: names are at most 4096 bytes, and info
/// requests a handful of u16s.
pub const MAX_OPTION_LEN: u32 = 8192;

/// A transmission request, as the client sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Command flags (`NBD_CMD_FLAG_*`).
    pub flags: u16,
    /// The command (`NBD_CMD_*`).
    pub kind: u16,
    /// Echoed in the reply.
    pub cookie: u64,
    /// First byte.
    pub offset: u64,
    /// Bytes.
    pub length: u32,
}

/// A request header that cannot be a request: the stream cannot be trusted past it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("bad request magic {0:#010x} (expected 0x25609513): the connection is out of step")]
pub struct BadMagic(pub u32);

impl Request {
    /// Parses a header.
    ///
    /// # Errors
    /// [`BadMagic`] when the header does not start with the request magic.
    pub fn parse(header: &[u8; REQUEST_LEN]) -> Result<Self, BadMagic> {
        let magic = be32(&header[0..4]);
        if magic != REQUEST_MAGIC {
            return Err(BadMagic(magic));
        }
        Ok(Self {
            flags: be16(&header[4..6]),
            kind: be16(&header[6..8]),
            cookie: be64(&header[8..16]),
            offset: be64(&header[16..24]),
            length: be32(&header[24..28]),
        })
    }

    /// The header's bytes (clients and tests build requests with it).
    pub fn encode(&self) -> [u8; REQUEST_LEN] {
        let mut out = [0u8; REQUEST_LEN];
        out[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        out[4..6].copy_from_slice(&self.flags.to_be_bytes());
        out[6..8].copy_from_slice(&self.kind.to_be_bytes());
        out[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        out[16..24].copy_from_slice(&self.offset.to_be_bytes());
        out[24..28].copy_from_slice(&self.length.to_be_bytes());
        out
    }
}

/// A simple reply's header: the data of a successful read follows it.
pub fn simple_reply(cookie: u64, error: u32) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    out[4..8].copy_from_slice(&error.to_be_bytes());
    out[8..16].copy_from_slice(&cookie.to_be_bytes());
    out
}

/// The server's greeting: magics and handshake flags.
pub fn greeting() -> [u8; 18] {
    let mut out = [0u8; 18];
    out[0..8].copy_from_slice(&INIT_MAGIC.to_be_bytes());
    out[8..16].copy_from_slice(&OPTS_MAGIC.to_be_bytes());
    out[16..18].copy_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    out
}

/// An option reply: header then `data`.
pub fn option_reply(option: u32, kind: u32, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(20 + data.len());
    out.extend_from_slice(&REP_MAGIC.to_be_bytes());
    out.extend_from_slice(&option.to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
    out
}

/// An option header from the client: magic, option, payload length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionHeader {
    pub option: u32,
    pub length: u32,
}

/// Parses an option header.
///
/// # Errors
/// The magic is not "IHAVEOPT".
pub fn parse_option_header(header: &[u8; 16]) -> Result<OptionHeader, String> {
    let magic = be64(&header[0..8]);
    if magic != OPTS_MAGIC {
        return Err(format!(
            "bad option magic {magic:#018x} (expected IHAVEOPT)"
        ));
    }
    Ok(OptionHeader {
        option: be32(&header[8..12]),
        length: be32(&header[12..16]),
    })
}

/// What `NBD_OPT_INFO` and `NBD_OPT_GO` carry: an export name and the information asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfoRequest {
    pub name: String,
    pub wanted: Vec<u16>,
}

/// Parses the payload of `NBD_OPT_INFO`/`NBD_OPT_GO`.
///
/// # Errors
/// A message for `NBD_REP_ERR_INVALID` when the lengths inside disagree with the payload.
pub fn parse_info_request(data: &[u8]) -> Result<InfoRequest, String> {
    let name_len = data
        .get(0..4)
        .map(be32)
        .ok_or("payload shorter than its name length")? as usize;
    let name = data
        .get(4..4 + name_len)
        .ok_or("name length runs past the payload")?;
    let name = String::from_utf8(name.to_vec()).map_err(|_| "export name is not UTF-8")?;
    let rest = &data[4 + name_len..];
    let count = rest
        .get(0..2)
        .map(be16)
        .ok_or("payload ends before the count of information requests")? as usize;
    let items = &rest[2..];
    if items.len() != count * 2 {
        return Err(format!(
            "{count} information requests announced, {} bytes follow",
            items.len()
        ));
    }
    Ok(InfoRequest {
        name,
        wanted: items.chunks_exact(2).map(be16).collect(),
    })
}

/// `NBD_INFO_EXPORT`: size and transmission flags.
pub fn info_export(size: u64, flags: u16) -> Vec<u8> {
    let mut out = INFO_EXPORT.to_be_bytes().to_vec();
    out.extend_from_slice(&size.to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
    out
}

/// `NBD_INFO_BLOCK_SIZE`: minimum, preferred and maximum block sizes.
pub fn info_block_size(min: u32, preferred: u32, max: u32) -> Vec<u8> {
    let mut out = INFO_BLOCK_SIZE.to_be_bytes().to_vec();
    for v in [min, preferred, max] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    out
}

/// `NBD_INFO_NAME` or `NBD_INFO_DESCRIPTION`: a string.
pub fn info_text(kind: u16, text: &str) -> Vec<u8> {
    let mut out = kind.to_be_bytes().to_vec();
    out.extend_from_slice(text.as_bytes());
    out
}

/// `NBD_REP_SERVER`'s payload for `NBD_OPT_LIST`.
pub fn server_entry(name: &str) -> Vec<u8> {
    let mut out = (name.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(name.as_bytes());
    out
}

/// The reply to `NBD_OPT_EXPORT_NAME`: size, flags, and 124 zeroes unless the client said
/// it does not want them.
pub fn export_name_reply(size: u64, flags: u16, no_zeroes: bool) -> Vec<u8> {
    let mut out = size.to_be_bytes().to_vec();
    out.extend_from_slice(&flags.to_be_bytes());
    if !no_zeroes {
        out.extend_from_slice(&[0u8; 124]);
    }
    out
}

/// The protocol's error value for an errno from the device.
pub fn error_of_errno(errno: i32) -> u32 {
    match errno {
        libc::EPERM | libc::EACCES | libc::EROFS => EPERM,
        libc::ENOMEM => ENOMEM,
        libc::EINVAL => EINVAL,
        libc::ENOSPC | libc::EDQUOT | libc::EFBIG => ENOSPC,
        libc::EOVERFLOW => EOVERFLOW,
        libc::EOPNOTSUPP => ENOTSUP,
        libc::ESHUTDOWN => ESHUTDOWN,
        _ => EIO,
    }
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_round_trips_and_rejects_bad_magic() {
        let r = Request {
            flags: CMD_FLAG_FUA,
            kind: CMD_WRITE,
            cookie: 0xdead_beef_0102_0304,
            offset: 1 << 40,
            length: 65536,
        };
        let bytes = r.encode();
        assert_eq!(Request::parse(&bytes), Ok(r));
        let mut bad = bytes;
        bad[0] = 0x67;
        assert!(Request::parse(&bad).is_err());
    }

    #[test]
    fn info_request_lengths_must_agree_with_the_payload() {
        let mut data = 3u32.to_be_bytes().to_vec();
        data.extend_from_slice(b"abc");
        data.extend_from_slice(&2u16.to_be_bytes());
        data.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
        data.extend_from_slice(&INFO_NAME.to_be_bytes());
        let parsed = parse_info_request(&data).unwrap();
        assert_eq!(parsed.name, "abc");
        assert_eq!(parsed.wanted, vec![INFO_BLOCK_SIZE, INFO_NAME]);
        assert!(parse_info_request(&data[..data.len() - 1]).is_err());
        let mut long_name = 1000u32.to_be_bytes().to_vec();
        long_name.extend_from_slice(b"abc");
        assert!(parse_info_request(&long_name).is_err());
        assert!(parse_info_request(&[0, 0]).is_err());
    }

    #[test]
    fn export_name_reply_leaves_out_zeroes_when_asked() {
        assert_eq!(export_name_reply(1, 3, false).len(), 8 + 2 + 124);
        assert_eq!(export_name_reply(1, 3, true).len(), 10);
    }
}
