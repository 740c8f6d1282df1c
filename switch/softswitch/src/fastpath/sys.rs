//! The few libbpf calls the fast path needs (system libbpf, `-lbpf`).
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void, CString};
use std::io;

#[repr(C)]
pub struct bpf_object {
    _p: [u8; 0],
}
#[repr(C)]
pub struct bpf_map {
    _p: [u8; 0],
}
#[repr(C)]
pub struct bpf_program {
    _p: [u8; 0],
}

/// libbpf's `struct bpf_link_create_opts`, up to and including `flags`; the
/// rest is zero (OPTS_VALID accepts a larger, zeroed tail).
#[repr(C)]
struct LinkCreateOpts {
    sz: usize,
    flags: u32,
    _rest: [u8; 60],
}

extern "C" {
    fn bpf_object__open_mem(buf: *const c_void, sz: usize, opts: *const c_void) -> *mut bpf_object;
    fn bpf_object__find_map_by_name(obj: *const bpf_object, name: *const c_char) -> *mut bpf_map;
    fn bpf_map__set_max_entries(map: *mut bpf_map, n: u32) -> c_int;
    fn bpf_map__set_map_flags(map: *mut bpf_map, flags: u32) -> c_int;
    fn bpf_map__map_flags(map: *const bpf_map) -> u32;
    fn bpf_object__load(obj: *mut bpf_object) -> c_int;
    fn bpf_map__fd(map: *const bpf_map) -> c_int;
    fn bpf_object__find_program_by_name(
        obj: *const bpf_object,
        name: *const c_char,
    ) -> *mut bpf_program;
    fn bpf_program__fd(prog: *const bpf_program) -> c_int;
    fn bpf_link_create(
        prog_fd: c_int,
        target_fd: c_int,
        attach_type: u32,
        opts: *const LinkCreateOpts,
    ) -> c_int;
    fn bpf_map_update_elem(
        fd: c_int,
        key: *const c_void,
        value: *const c_void,
        flags: u64,
    ) -> c_int;
    fn bpf_map_lookup_elem(fd: c_int, key: *const c_void, value: *mut c_void) -> c_int;
    fn bpf_map_delete_elem(fd: c_int, key: *const c_void) -> c_int;
    fn bpf_map_get_next_key(fd: c_int, key: *const c_void, next: *mut c_void) -> c_int;
    fn bpf_prog_test_run_opts(prog_fd: c_int, opts: *mut TestRunOpts) -> c_int;
}

/// libbpf's `struct bpf_test_run_opts`.
#[repr(C)]
struct TestRunOpts {
    sz: usize,
    data_in: *const c_void,
    data_out: *mut c_void,
    data_size_in: u32,
    data_size_out: u32,
    ctx_in: *const c_void,
    ctx_out: *mut c_void,
    ctx_size_in: u32,
    ctx_size_out: u32,
    retval: u32,
    repeat: c_int,
    duration: u32,
    flags: u32,
    cpu: u32,
    batch_size: u32,
}

/// The kernel's `struct xdp_md` as a test run's context.
#[cfg(test)]
#[repr(C)]
#[derive(Default)]
struct XdpMd {
    data: u32,
    data_end: u32,
    data_meta: u32,
    ingress_ifindex: u32,
    rx_queue_index: u32,
    egress_ifindex: u32,
}

/// Runs an XDP program once on `frame` as if received on `ifindex`
/// (BPF_PROG_TEST_RUN): (XDP verdict, the frame as the program left it).
#[cfg(test)]
pub fn test_run(prog_fd: c_int, frame: &[u8], ifindex: u32) -> io::Result<(u32, Vec<u8>)> {
    let mut out = vec![0u8; frame.len() + 256];
    let ctx = XdpMd {
        data_end: frame.len() as u32,
        ingress_ifindex: ifindex,
        ..XdpMd::default()
    };
    let mut o = TestRunOpts {
        sz: std::mem::size_of::<TestRunOpts>(),
        data_in: frame.as_ptr().cast(),
        data_out: out.as_mut_ptr().cast(),
        data_size_in: frame.len() as u32,
        data_size_out: out.len() as u32,
        ctx_in: (&ctx as *const XdpMd).cast(),
        ctx_out: std::ptr::null_mut(),
        ctx_size_in: std::mem::size_of::<XdpMd>() as u32,
        ctx_size_out: 0,
        retval: 0,
        repeat: 1,
        duration: 0,
        flags: 0,
        cpu: 0,
        batch_size: 0,
    };
    // SAFETY: buffers outlive the call; sizes given.
    rc(unsafe { bpf_prog_test_run_opts(prog_fd, &mut o) })?;
    out.truncate(o.data_size_out as usize);
    Ok((o.retval, out))
}

/// BPF_F_TEST_XDP_LIVE_FRAMES: the run's verdicts act (XDP_REDIRECT sends).
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;

/// Runs an XDP program once on `frame` in live mode: a redirect it returns
/// really sends the frame (through the target's ndo_xdp_xmit, as native XDP
/// does).
pub fn run_live(prog_fd: c_int, frame: &[u8]) -> io::Result<()> {
    let mut o = TestRunOpts {
        sz: std::mem::size_of::<TestRunOpts>(),
        data_in: frame.as_ptr().cast(),
        data_out: std::ptr::null_mut(),
        data_size_in: frame.len() as u32,
        data_size_out: 0,
        ctx_in: std::ptr::null(),
        ctx_out: std::ptr::null_mut(),
        ctx_size_in: 0,
        ctx_size_out: 0,
        retval: 0,
        repeat: 1,
        duration: 0,
        flags: BPF_F_TEST_XDP_LIVE_FRAMES,
        cpu: 0,
        batch_size: 0,
    };
    // SAFETY: `frame` outlives the call; no output buffers.
    rc(unsafe { bpf_prog_test_run_opts(prog_fd, &mut o) })
}

const BPF_XDP: u32 = 37;
pub const BPF_ANY: u64 = 0;
pub const BPF_EXIST: u64 = 2;
pub const BPF_F_NO_PREALLOC: u32 = 1;
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

fn rc(r: c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::from_raw_os_error(-r))
    } else {
        Ok(())
    }
}

/// A loaded BPF object. Never closed: its maps and program live as long as
/// the process (the registers are mmapped from one of them).
pub struct Object(*mut bpf_object);

// SAFETY: after load, libbpf's object is only read (fds, lookups by name).
unsafe impl Send for Object {}
unsafe impl Sync for Object {}

impl Object {
    pub fn open(elf: &'static [u8]) -> io::Result<Object> {
        // SAFETY: buffer valid for 'static; NULL opts = defaults.
        let o = unsafe { bpf_object__open_mem(elf.as_ptr().cast(), elf.len(), std::ptr::null()) };
        if o.is_null() {
            return Err(io::Error::last_os_error());
        }
        Ok(Object(o))
    }

    fn map(&self, name: &str) -> io::Result<*mut bpf_map> {
        let n = CString::new(name).expect("no NUL");
        // SAFETY: valid object and C string.
        let m = unsafe { bpf_object__find_map_by_name(self.0, n.as_ptr()) };
        if m.is_null() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("map {name}"),
            ));
        }
        Ok(m)
    }

    /// Before load: the map's size, and optionally allocation on insert.
    pub fn size_map(&self, name: &str, entries: u32, no_prealloc: bool) -> io::Result<()> {
        let m = self.map(name)?;
        // SAFETY: valid map of an object not yet loaded.
        unsafe {
            rc(bpf_map__set_max_entries(m, entries))?;
            if no_prealloc {
                rc(bpf_map__set_map_flags(
                    m,
                    bpf_map__map_flags(m) | BPF_F_NO_PREALLOC,
                ))?;
            }
        }
        Ok(())
    }

    pub fn load(&self) -> io::Result<()> {
        // SAFETY: valid, opened object.
        rc(unsafe { bpf_object__load(self.0) })
    }

    pub fn map_fd(&self, name: &str) -> io::Result<c_int> {
        let m = self.map(name)?;
        // SAFETY: valid map.
        let fd = unsafe { bpf_map__fd(m) };
        rc(fd).map(|()| fd)
    }

    pub fn prog_fd(&self, name: &str) -> io::Result<c_int> {
        let n = CString::new(name).expect("no NUL");
        // SAFETY: valid object and C string.
        let p = unsafe { bpf_object__find_program_by_name(self.0, n.as_ptr()) };
        if p.is_null() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("program {name}"),
            ));
        }
        // SAFETY: valid program.
        let fd = unsafe { bpf_program__fd(p) };
        rc(fd).map(|()| fd)
    }
}

/// Attaches an XDP program to an interface through a BPF link: the kernel
/// detaches it when the link fd closes, so a crashed softswitch leaves no
/// program behind forwarding with stale tables.
pub fn xdp_link(prog_fd: c_int, ifindex: u32, flags: u32) -> io::Result<c_int> {
    let opts = LinkCreateOpts {
        sz: std::mem::size_of::<LinkCreateOpts>(),
        flags,
        _rest: [0; 60],
    };
    // SAFETY: valid opts; fds owned by us.
    let fd = unsafe { bpf_link_create(prog_fd, ifindex as c_int, BPF_XDP, &opts) };
    rc(fd).map(|()| fd)
}

pub fn update<K, V>(fd: c_int, k: &K, v: &V, flags: u64) -> io::Result<()> {
    // SAFETY: key and value are plain repr(C) data of the map's sizes.
    rc(unsafe { bpf_map_update_elem(fd, (k as *const K).cast(), (v as *const V).cast(), flags) })
}

pub fn lookup<K, V: Default>(fd: c_int, k: &K) -> Option<V> {
    let mut v = V::default();
    // SAFETY: as `update`.
    let r = unsafe { bpf_map_lookup_elem(fd, (k as *const K).cast(), (&mut v as *mut V).cast()) };
    (r == 0).then_some(v)
}

pub fn delete<K>(fd: c_int, k: &K) -> io::Result<()> {
    // SAFETY: as `update`.
    rc(unsafe { bpf_map_delete_elem(fd, (k as *const K).cast()) })
}

/// Every key of a hash map (a snapshot; concurrent changes may be missed).
pub fn keys<K: Default + Copy>(fd: c_int) -> Vec<K> {
    let mut out = Vec::new();
    let mut next = K::default();
    // SAFETY: NULL key = first key; key buffers of the map's key size.
    let mut r = unsafe { bpf_map_get_next_key(fd, std::ptr::null(), (&mut next as *mut K).cast()) };
    while r == 0 {
        out.push(next);
        let cur = next;
        // SAFETY: as above.
        r = unsafe {
            bpf_map_get_next_key(fd, (&cur as *const K).cast(), (&mut next as *mut K).cast())
        };
    }
    out
}
