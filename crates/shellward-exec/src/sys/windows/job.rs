//! A job object: the container of one command's processes.

use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle, RawHandle};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_ACTIVE_PROCESS,
    JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, JOBOBJECT_BASIC_ACCOUNTING_INFORMATION,
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JobObjectBasicAccountingInformation,
    JobObjectBasicProcessIdList, JobObjectExtendedLimitInformation, QueryInformationJobObject,
    SetInformationJobObject, TerminateJobObject,
};

/// The exit code of the processes a kill ends (as `taskkill /f` leaves).
pub(crate) const KILLED_EXIT_CODE: u32 = 1;

/// A job object that kills its processes when its last handle closes.
#[derive(Debug)]
pub(crate) struct Job {
    handle: OwnedHandle,
}

impl Job {
    /// A new, unnamed job: kill on close, and at most `max_processes` processes at once when given.
    pub(crate) fn new(max_processes: Option<u32>) -> io::Result<Job> {
        // SAFETY: no security attributes, no name; the returned handle is checked before it is owned.
        let raw = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
        if raw.is_null() {
            return Err(io::Error::other(format!(
                "cannot create a job object for the command: {}",
                io::Error::last_os_error()
            )));
        }
        // SAFETY: `raw` is a fresh, valid handle this code owns from here on.
        let handle = unsafe { OwnedHandle::from_raw_handle(raw as RawHandle) };
        let job = Job { handle };
        // SAFETY: an all-zero JOBOBJECT_EXTENDED_LIMIT_INFORMATION is a valid "no limits" value.
        let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
        limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
        if let Some(n) = max_processes {
            limits.BasicLimitInformation.LimitFlags |= JOB_OBJECT_LIMIT_ACTIVE_PROCESS;
            limits.BasicLimitInformation.ActiveProcessLimit = n;
        }
        // SAFETY: a valid job handle, and a pointer to a structure of the size given.
        let ok = unsafe {
            SetInformationJobObject(
                job.raw(),
                JobObjectExtendedLimitInformation,
                (&raw const limits).cast(),
                std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
            )
        };
        if ok == 0 {
            return Err(io::Error::other(format!(
                "cannot make the command's job object kill its processes on close: {}",
                io::Error::last_os_error()
            )));
        }
        Ok(job)
    }

    fn raw(&self) -> windows_sys::Win32::Foundation::HANDLE {
        self.handle.as_raw_handle() as _
    }

    /// Puts a process (a handle with `PROCESS_SET_QUOTA | PROCESS_TERMINATE`) in the job; what it starts from then on
    /// is in the job too.
    pub(crate) fn assign(&self, process: RawHandle) -> io::Result<()> {
        // SAFETY: both handles are valid for the duration of the call.
        if unsafe { AssignProcessToJobObject(self.raw(), process as _) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Ends every process in the job at once.
    pub(crate) fn terminate(&self) -> io::Result<()> {
        // SAFETY: a valid job handle.
        if unsafe { TerminateJobObject(self.raw(), KILLED_EXIT_CODE) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// How many processes of the job are alive now.
    pub(crate) fn active(&self) -> io::Result<u32> {
        // SAFETY: an all-zero accounting structure is valid to be written over.
        let mut info: JOBOBJECT_BASIC_ACCOUNTING_INFORMATION = unsafe { std::mem::zeroed() };
        // SAFETY: a valid job handle, and a pointer to a structure of the size given.
        let ok = unsafe {
            QueryInformationJobObject(
                self.raw(),
                JobObjectBasicAccountingInformation,
                (&raw mut info).cast(),
                std::mem::size_of::<JOBOBJECT_BASIC_ACCOUNTING_INFORMATION>() as u32,
                std::ptr::null_mut(),
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(info.ActiveProcesses)
    }

    /// The ids of the job's processes now (at most 1,024 are listed).
    pub(crate) fn pids(&self) -> Vec<u32> {
        const MAX: usize = 1024;
        // The list's layout: two u32 counts, then the ids as pointer-sized integers.
        let mut buf = vec![0usize; 1 + MAX];
        // SAFETY: a valid job handle, and a buffer of the size given, aligned for the structure.
        let ok = unsafe {
            QueryInformationJobObject(
                self.raw(),
                JobObjectBasicProcessIdList,
                buf.as_mut_ptr().cast(),
                (buf.len() * std::mem::size_of::<usize>()) as u32,
                std::ptr::null_mut(),
            )
        };
        if ok == 0 {
            return Vec::new();
        }
        let listed = (buf[0] >> 32) as usize;
        buf[1..=listed.min(MAX)].iter().map(|&p| p as u32).collect()
    }
}
