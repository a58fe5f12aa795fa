/* The errno names hl_errno_name and hl_errno_index know: every errno of
 * Linux (glibc's strerrorname_np, 2.36), each where the platform defines
 * it.  Included once, by telemetry.c, inside its table: E(name) is
 * {"name", name}.  The first of two names of one value is the one
 * hl_errno_name gives (EAGAIN, not EWOULDBLOCK); the eight first are the
 * list the messages show. */
#ifdef EAGAIN
    E(EAGAIN)
#endif
#ifdef ENOMEM
    E(ENOMEM)
#endif
#ifdef EINVAL
    E(EINVAL)
#endif
#ifdef EIO
    E(EIO)
#endif
#ifdef EPERM
    E(EPERM)
#endif
#ifdef EFAULT
    E(EFAULT)
#endif
#ifdef EBUSY
    E(EBUSY)
#endif
#ifdef ENOSYS
    E(ENOSYS)
#endif
#ifdef ENOENT
    E(ENOENT)
#endif
#ifdef ESRCH
    E(ESRCH)
#endif
#ifdef EINTR
    E(EINTR)
#endif
#ifdef ENXIO
    E(ENXIO)
#endif
#ifdef E2BIG
    E(E2BIG)
#endif
#ifdef ENOEXEC
    E(ENOEXEC)
#endif
#ifdef EBADF
    E(EBADF)
#endif
#ifdef ECHILD
    E(ECHILD)
#endif
#ifdef EACCES
    E(EACCES)
#endif
#ifdef ENOTBLK
    E(ENOTBLK)
#endif
#ifdef EEXIST
    E(EEXIST)
#endif
#ifdef EXDEV
    E(EXDEV)
#endif
#ifdef ENODEV
    E(ENODEV)
#endif
#ifdef ENOTDIR
    E(ENOTDIR)
#endif
#ifdef EISDIR
    E(EISDIR)
#endif
#ifdef ENFILE
    E(ENFILE)
#endif
#ifdef EMFILE
    E(EMFILE)
#endif
#ifdef ENOTTY
    E(ENOTTY)
#endif
#ifdef ETXTBSY
    E(ETXTBSY)
#endif
#ifdef EFBIG
    E(EFBIG)
#endif
#ifdef ENOSPC
    E(ENOSPC)
#endif
#ifdef ESPIPE
    E(ESPIPE)
#endif
#ifdef EROFS
    E(EROFS)
#endif
#ifdef EMLINK
    E(EMLINK)
#endif
#ifdef EPIPE
    E(EPIPE)
#endif
#ifdef EDOM
    E(EDOM)
#endif
#ifdef ERANGE
    E(ERANGE)
#endif
#ifdef EDEADLK
    E(EDEADLK)
#endif
#ifdef ENAMETOOLONG
    E(ENAMETOOLONG)
#endif
#ifdef ENOLCK
    E(ENOLCK)
#endif
#ifdef ENOTEMPTY
    E(ENOTEMPTY)
#endif
#ifdef ELOOP
    E(ELOOP)
#endif
#ifdef ENOMSG
    E(ENOMSG)
#endif
#ifdef EIDRM
    E(EIDRM)
#endif
#ifdef ECHRNG
    E(ECHRNG)
#endif
#ifdef EL2NSYNC
    E(EL2NSYNC)
#endif
#ifdef EL3HLT
    E(EL3HLT)
#endif
#ifdef EL3RST
    E(EL3RST)
#endif
#ifdef ELNRNG
    E(ELNRNG)
#endif
#ifdef EUNATCH
    E(EUNATCH)
#endif
#ifdef ENOCSI
    E(ENOCSI)
#endif
#ifdef EL2HLT
    E(EL2HLT)
#endif
#ifdef EBADE
    E(EBADE)
#endif
#ifdef EBADR
    E(EBADR)
#endif
#ifdef EXFULL
    E(EXFULL)
#endif
#ifdef ENOANO
    E(ENOANO)
#endif
#ifdef EBADRQC
    E(EBADRQC)
#endif
#ifdef EBADSLT
    E(EBADSLT)
#endif
#ifdef EBFONT
    E(EBFONT)
#endif
#ifdef ENOSTR
    E(ENOSTR)
#endif
#ifdef ENODATA
    E(ENODATA)
#endif
#ifdef ETIME
    E(ETIME)
#endif
#ifdef ENOSR
    E(ENOSR)
#endif
#ifdef ENONET
    E(ENONET)
#endif
#ifdef ENOPKG
    E(ENOPKG)
#endif
#ifdef EREMOTE
    E(EREMOTE)
#endif
#ifdef ENOLINK
    E(ENOLINK)
#endif
#ifdef EADV
    E(EADV)
#endif
#ifdef ESRMNT
    E(ESRMNT)
#endif
#ifdef ECOMM
    E(ECOMM)
#endif
#ifdef EPROTO
    E(EPROTO)
#endif
#ifdef EMULTIHOP
    E(EMULTIHOP)
#endif
#ifdef EDOTDOT
    E(EDOTDOT)
#endif
#ifdef EBADMSG
    E(EBADMSG)
#endif
#ifdef EOVERFLOW
    E(EOVERFLOW)
#endif
#ifdef ENOTUNIQ
    E(ENOTUNIQ)
#endif
#ifdef EBADFD
    E(EBADFD)
#endif
#ifdef EREMCHG
    E(EREMCHG)
#endif
#ifdef ELIBACC
    E(ELIBACC)
#endif
#ifdef ELIBBAD
    E(ELIBBAD)
#endif
#ifdef ELIBSCN
    E(ELIBSCN)
#endif
#ifdef ELIBMAX
    E(ELIBMAX)
#endif
#ifdef ELIBEXEC
    E(ELIBEXEC)
#endif
#ifdef EILSEQ
    E(EILSEQ)
#endif
#ifdef ERESTART
    E(ERESTART)
#endif
#ifdef ESTRPIPE
    E(ESTRPIPE)
#endif
#ifdef EUSERS
    E(EUSERS)
#endif
#ifdef ENOTSOCK
    E(ENOTSOCK)
#endif
#ifdef EDESTADDRREQ
    E(EDESTADDRREQ)
#endif
#ifdef EMSGSIZE
    E(EMSGSIZE)
#endif
#ifdef EPROTOTYPE
    E(EPROTOTYPE)
#endif
#ifdef ENOPROTOOPT
    E(ENOPROTOOPT)
#endif
#ifdef EPROTONOSUPPORT
    E(EPROTONOSUPPORT)
#endif
#ifdef ESOCKTNOSUPPORT
    E(ESOCKTNOSUPPORT)
#endif
#ifdef EOPNOTSUPP
    E(EOPNOTSUPP)
#endif
#ifdef EPFNOSUPPORT
    E(EPFNOSUPPORT)
#endif
#ifdef EAFNOSUPPORT
    E(EAFNOSUPPORT)
#endif
#ifdef EADDRINUSE
    E(EADDRINUSE)
#endif
#ifdef EADDRNOTAVAIL
    E(EADDRNOTAVAIL)
#endif
#ifdef ENETDOWN
    E(ENETDOWN)
#endif
#ifdef ENETUNREACH
    E(ENETUNREACH)
#endif
#ifdef ENETRESET
    E(ENETRESET)
#endif
#ifdef ECONNABORTED
    E(ECONNABORTED)
#endif
#ifdef ECONNRESET
    E(ECONNRESET)
#endif
#ifdef ENOBUFS
    E(ENOBUFS)
#endif
#ifdef EISCONN
    E(EISCONN)
#endif
#ifdef ENOTCONN
    E(ENOTCONN)
#endif
#ifdef ESHUTDOWN
    E(ESHUTDOWN)
#endif
#ifdef ETOOMANYREFS
    E(ETOOMANYREFS)
#endif
#ifdef ETIMEDOUT
    E(ETIMEDOUT)
#endif
#ifdef ECONNREFUSED
    E(ECONNREFUSED)
#endif
#ifdef EHOSTDOWN
    E(EHOSTDOWN)
#endif
#ifdef EHOSTUNREACH
    E(EHOSTUNREACH)
#endif
#ifdef EALREADY
    E(EALREADY)
#endif
#ifdef EINPROGRESS
    E(EINPROGRESS)
#endif
#ifdef ESTALE
    E(ESTALE)
#endif
#ifdef EUCLEAN
    E(EUCLEAN)
#endif
#ifdef ENOTNAM
    E(ENOTNAM)
#endif
#ifdef ENAVAIL
    E(ENAVAIL)
#endif
#ifdef EISNAM
    E(EISNAM)
#endif
#ifdef EREMOTEIO
    E(EREMOTEIO)
#endif
#ifdef EDQUOT
    E(EDQUOT)
#endif
#ifdef ENOMEDIUM
    E(ENOMEDIUM)
#endif
#ifdef EMEDIUMTYPE
    E(EMEDIUMTYPE)
#endif
#ifdef ECANCELED
    E(ECANCELED)
#endif
#ifdef ENOKEY
    E(ENOKEY)
#endif
#ifdef EKEYEXPIRED
    E(EKEYEXPIRED)
#endif
#ifdef EKEYREVOKED
    E(EKEYREVOKED)
#endif
#ifdef EKEYREJECTED
    E(EKEYREJECTED)
#endif
#ifdef EOWNERDEAD
    E(EOWNERDEAD)
#endif
#ifdef ENOTRECOVERABLE
    E(ENOTRECOVERABLE)
#endif
#ifdef ERFKILL
    E(ERFKILL)
#endif
#ifdef EHWPOISON
    E(EHWPOISON)
#endif
#ifdef EDEADLOCK
    E(EDEADLOCK)
#endif
#ifdef ENOTSUP
    E(ENOTSUP)
#endif
#ifdef EWOULDBLOCK
    E(EWOULDBLOCK)
#endif
