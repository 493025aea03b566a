//! The hand-over of a proxied command's listener: made by the command's process in its new network namespace and
//! sent to the executor (`SCM_RIGHTS` over a unix datagram pair), which serves it on the host's network
//! (`crate::proxy`). A socket stays in the namespace it was made in wherever its descriptor goes.

use std::os::fd::RawFd;

/// Room for the control message: CMSG_SPACE(sizeof(int)) is 24 on 64-bit Linux; 64 bytes, aligned for `cmsghdr`,
/// hold it on any target.
#[repr(C, align(8))]
struct Control([u8; 64]);

/// The one byte of data that carries the control message.
fn one_byte(byte: &mut [u8; 1]) -> libc::iovec {
    libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    }
}

/// A message of `iov` with all of `control` as its control buffer (async-signal-safe: stack memory only). The
/// pointers are into the callers' buffers, which must outlive the message's use.
fn message(iov: &mut libc::iovec, control: &mut Control) -> libc::msghdr {
    // SAFETY: `msghdr` is plain data: all zeroes is a valid value (no iov, no control).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control.0.len() as _;
    msg
}

/// In the child, in its new network namespace: listens on `127.0.0.1:3128` (`crate::proxy::PROXY_ADDR`) and sends
/// the listening socket over `channel` (a unix socket whose other end the executor holds), which serves it on the
/// host's network; a socket stays in the namespace it was made in wherever its descriptor goes. Returns the errno on
/// failure. Async-signal-safe: socket, setsockopt, bind, listen, sendmsg and close on stack memory.
pub(crate) fn proxy_listener(channel: RawFd) -> Result<(), i32> {
    if channel < 0 {
        return Err(libc::EINVAL);
    }
    // SAFETY: system calls on a descriptor this function owns, `channel` (held open by the parent for the spawn),
    // and zeroed stack structures laid out as the kernel expects (`sockaddr_in`, `msghdr` with one `SCM_RIGHTS`
    // control message sized by CMSG_SPACE for one descriptor).
    unsafe {
        let errno = || *libc::__errno_location();
        let sock = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if sock < 0 {
            return Err(errno());
        }
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_port = crate::proxy::PROXY_PORT.to_be();
        addr.sin_addr.s_addr = u32::from_be_bytes([127, 0, 0, 1]).to_be();
        let bound = libc::bind(
            sock,
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ) == 0
            && libc::listen(sock, 128) == 0;
        if !bound {
            let e = errno();
            libc::close(sock);
            return Err(e);
        }
        let sent = send_fds(channel, &[sock]);
        // The executor has its own copy now; this process must not keep the listener (the command would inherit it).
        libc::close(sock);
        sent
    }
}

/// Sends `fds` (at most [`MAX_FDS`]) over `channel` as one `SCM_RIGHTS` message with one byte of data. Returns the
/// errno on failure. Async-signal-safe: one sendmsg on stack memory.
pub(crate) fn send_fds(channel: RawFd, fds: &[RawFd]) -> Result<(), i32> {
    if fds.is_empty() || fds.len() > MAX_FDS {
        return Err(libc::EINVAL);
    }
    let size = std::mem::size_of_val(fds) as u32;
    // SAFETY: the message is laid out in stack buffers: one control message sized by CMSG_SPACE for `fds`, which fits
    // in `Control` (64 bytes hold CMSG_SPACE of four ints).
    unsafe {
        let (mut byte, mut control) = ([0u8; 1], Control([0; 64]));
        let mut iov = one_byte(&mut byte);
        let mut msg = message(&mut iov, &mut control);
        msg.msg_controllen = libc::CMSG_SPACE(size) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(size) as _;
        let data = libc::CMSG_DATA(cmsg).cast::<libc::c_int>();
        for (i, &fd) in fds.iter().enumerate() {
            std::ptr::write_unaligned(data.add(i), fd);
        }
        if libc::sendmsg(channel, &msg, libc::MSG_NOSIGNAL) == 1 {
            Ok(())
        } else {
            Err(*libc::__errno_location())
        }
    }
}

/// Most descriptors one message carries.
pub(crate) const MAX_FDS: usize = 4;

/// In the executor, after a [`NET_PROXIED`] spawn: the listener the child sent over `channel`, if it did.
pub(crate) fn receive_listener(channel: RawFd) -> std::io::Result<std::os::fd::OwnedFd> {
    let [fd] = receive_fds::<1>(channel).map_err(|e| {
        if e.kind() == std::io::ErrorKind::InvalidData {
            std::io::Error::other("the command's process did not hand over its proxy listener")
        } else {
            e
        }
    })?;
    Ok(fd)
}

/// The `N` descriptors (at most [`MAX_FDS`]) a child sent over `channel` with [`send_fds`], if it did (without
/// waiting: it sent before exec). A message with another count is refused (`InvalidData`), its descriptors closed.
pub(crate) fn receive_fds<const N: usize>(
    channel: RawFd,
) -> std::io::Result<[std::os::fd::OwnedFd; N]> {
    use std::os::fd::{FromRawFd, OwnedFd};
    // SAFETY: recvmsg into stack buffers laid out as in `send_fds`; every received descriptor is owned from here.
    unsafe {
        let (mut byte, mut control) = ([0u8; 1], Control([0; 64]));
        let mut iov = one_byte(&mut byte);
        let mut msg = message(&mut iov, &mut control);
        let n = libc::recvmsg(
            channel,
            &mut msg,
            libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
        );
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
        {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "no descriptors were handed over",
            ));
        }
        let header = libc::CMSG_LEN(0) as usize;
        let count =
            ((*cmsg).cmsg_len as usize).saturating_sub(header) / std::mem::size_of::<libc::c_int>();
        let data = libc::CMSG_DATA(cmsg).cast::<libc::c_int>();
        let got: Vec<OwnedFd> = (0..count.min(MAX_FDS))
            .map(|i| OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))))
            .collect();
        got.try_into().map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{count} descriptors were handed over, {N} expected"),
            )
        })
    }
}
