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
        let (mut byte, mut control) = ([0u8; 1], Control([0; 64]));
        let mut iov = one_byte(&mut byte);
        let mut msg = message(&mut iov, &mut control);
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), sock);
        let sent = libc::sendmsg(channel, &msg, libc::MSG_NOSIGNAL) == 1;
        let e = errno();
        // The executor has its own copy now; this process must not keep the listener (the command would inherit it).
        libc::close(sock);
        if sent { Ok(()) } else { Err(e) }
    }
}

/// In the executor, after a [`NET_PROXIED`] spawn: the listener the child sent over `channel`, if it did.
pub(crate) fn receive_listener(channel: RawFd) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: recvmsg into stack buffers laid out as in `proxy_listener`; a received descriptor is owned from here.
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
            return Err(std::io::Error::other(
                "the command's process did not hand over its proxy listener",
            ));
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
        Ok(std::os::fd::OwnedFd::from_raw_fd(fd))
    }
}
