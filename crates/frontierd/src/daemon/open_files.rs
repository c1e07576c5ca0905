//! The process's open-files limit: every socket (a fetch in flight, a kept connection) is a
//! file, and a shell's usual soft limit of 1 024 is below what the default fetch settings
//! may hold open, so the soft limit is raised to the hard one at start (as nginx's
//! `worker_rlimit_nofile` or Go's runtime do).

use std::io;

use crate::internal_events::daemon::OpenFilesLimit;

/// Raise the soft open-files limit to the hard one (or as near as the kernel allows); the
/// limit before and after, as the event that logs them.
pub fn raise_to_hard_limit() -> io::Result<OpenFilesLimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given, nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let before = lim.rlim_cur;
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads the struct it is given, nothing else.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = lim.rlim_max;
        }
        // else (an unlimited hard limit above the kernel's nr_open): the soft one stays
    }
    Ok(OpenFilesLimit {
        before,
        now: lim.rlim_cur,
    })
}
