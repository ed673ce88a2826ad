/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The boundary between the BPF programs and user space: every struct, enum and constant both sides use. */
#ifndef TLSPROF_H
#define TLSPROF_H

/* Nesting depth of stage frames tracked per thread; deeper calls are counted in depth_overflow. */
#define TLSPROF_MAX_DEPTH 12

/* Stage ids. User space generates its Stage enum from this list (build.rs): a stage's name is its id's
 * suffix in lower case. STAGE_NONE marks functions that only carry facts. */
enum tlsprof_stage {
	STAGE_NONE = 0,
	STAGE_HANDSHAKE = 1,
	STAGE_KEYGEN = 2,
	STAGE_DERIVE = 3,
	STAGE_SIGN = 4,
	STAGE_VERIFY = 5,
	STAGE_KEY_SCHEDULE = 6,
	STAGE_RESUME = 7,
	STAGE_READ = 8,
	STAGE_WRITE = 9,
	STAGE_COUNT = 10,
};

/* Per-function facts, packed into the probe's attach cookie (see COOKIE_* below). */
enum tlsprof_func_flags {
	/* The first argument is the SSL * of the connection. */
	FF_SSL_ARG = 1 << 0,
	/* Calling this function makes the connection a server / a client (a stage function: the connection of the
	 * handshake call it runs in). */
	FF_ROLE_SERVER = 1 << 1,
	FF_ROLE_CLIENT = 1 << 2,
	/* A certificate private-key operation (signature, RSA key transport): only full handshakes do it. */
	FF_PRIVATE_KEY_OP = 1 << 3,
	/* Peer certificate chain verification: only full handshakes do it. */
	FF_PEER_CERT_CHECK = 1 << 4,
	/* A new connection starts on this SSL * (a freed one's address may be reused): forget the old one. */
	FF_CONN_START = 1 << 5,
	/* Argument 3 points to the length of the signature made (read at return): the certificate key's size. */
	FF_SIG_LEN_PTR = 1 << 6,
	/* Argument 3 is the length of the signature checked. */
	FF_SIG_LEN_ARG = 1 << 7,
	/* Argument 3 points to the length of the shared secret derived (read at return): the key exchange. */
	FF_SECRET_LEN_PTR = 1 << 8,
	/* The kernel single-steps the instruction this probe sits on instead of emulating it (a function's first
	 * instruction, a Go return instruction): each hit costs the thread a second trap
	 * (src/record/discovery/prologue.rs). */
	FF_STEPPED = 1 << 9,
	/* The connection ends here (SSL_free, entry only): a handshake that did work and never completed is
	 * reported then, as abandoned. */
	FF_CONN_END = 1 << 10,
	/* Returns the length of the shared secret (ECDH_compute_key, DH_compute_key): only prime curves and
	 * finite-field groups go through these, so the length names the group. */
	FF_SECRET_LEN_RET = 1 << 11,
	/* SSL_read/SSL_write of a library whose state machine is not probed (public API only): a handshake driven
	 * from them runs inside, and their success (> 0) means it has completed. */
	FF_IO_DRIVER = 1 << 12,
	/* Go code (register ABI): argument 1 is in RAX and so is the result (an error: nil, 0, on success); the
	 * stage frames are the goroutine's (R14), and the function's exits are entry-style probes on its return
	 * sites (COOKIE_SITE): a return probe would crash Go when it moves a goroutine's stack. */
	FF_GO_ABI = 1 << 13,
	/* Go's scheduler: runtime.execute starts running the goroutine in argument 1 on this thread,
	 * runtime.mcall stops the current one, runtime.goexit1 ends it. On-CPU time is charged to the goroutine
	 * between these, so a goroutine switch on one thread (no kernel context switch) moves the clock. */
	FF_G_RUN = 1 << 14,
	FF_G_STOP = 1 << 15,
	FF_G_END = 1 << 16,
	/* The signature made is the function's result. Go: a []byte, its length in RBX at an exit site. Rust: a
	 * Result<Vec<u8>, _> written through the return slot (argument 1, returned in RAX), its words 1 and 3
	 * the Vec's capacity and length, equal for a signature copied out of a buffer. */
	FF_SIG_RESULT = 1 << 17,
	/* Go: the signature checked is the first argument passed on the stack (a []byte past the nine integer
	 * registers of the register ABI): its length is at 16(SP) at entry. */
	FF_GO_SIG_STACK_ARG = 1 << 18,
	/* A library driven message by message (rustls): each handshake message is handled by a step of its
	 * state machine, with no call around the whole handshake. Argument 2 (after the return slot) of this
	 * function (entry only) is the connection the thread works on from now: the steps that follow are its. */
	FF_CONN_CURRENT = 1 << 19,
	/* One step of such a handshake: a handshake frame of the thread's current connection (FF_CONN_CURRENT),
	 * whose return completes the handshake only if it is an FF_HS_FINISH step that sent no fatal alert. With
	 * FF_CONN_START: a connection whose handshake completed starts anew here (the same address reused). */
	FF_HS_STEP = 1 << 20,
	FF_HS_FINISH = 1 << 21,
	/* The library sends a fatal alert (entry only): the handshake step running fails. */
	FF_FATAL_ALERT = 1 << 22,
	/* A client's first step (its ClientHello and key share), made before its connection's state has the
	 * address FF_CONN_CURRENT will give: its work is kept for the thread (under FIRST_FLIGHT_KEY | tid) and
	 * joins the connection of the thread's next FF_CONN_CURRENT call that has done no work yet. */
	FF_FIRST_FLIGHT = 1 << 23,
	/* The connection is the function's result (SSL_new), read by its return probe, its only one: with
	 * FF_CONN_START, a connection starts on the SSL * returned. Where a library's SSL_free cannot be found
	 * (a build without symbols), a reused address still starts anew. */
	FF_SSL_RET = 1 << 24,
	/* Go code whose exits are its return instructions, which the kernel single-steps: its entry reports each
	 * return address it has not seen before (EVENT_GO_RETURN), for user space to probe where that caller
	 * resumes (SITE_LEARNED) and then take the return instructions' probes away. */
	FF_GO_LEARN_RETURN = 1 << 25,
	/* The probe's link is its file's in every process that maps it, not one process's (a process that starts
	 * during the recording is probed from its first instruction): the programs act for targets only, and count
	 * the other processes' hits apart (STAT_OTHER_HITS). */
	FF_ANY_PROCESS = 1 << 26,
	/* Go's (*QUICConn).HandleData(level, data) (entry only, no frame): at the Initial level (RBX 0) the first
	 * bytes of data, the start of the ClientHello (a server) or ServerHello (a client), hold the connection's
	 * random, which its Initial packets carry too: EVENT_QUIC_CONN ties the connection (the *Conn the QUICConn
	 * points to first) to the hellos user space reads off the wire. */
	FF_QUIC_HELLO = 1 << 27,
};

/* The connection key a client's first flight is kept under until its connection is known: no address. */
#define FIRST_FLIGHT_KEY (1ULL << 63)

/* Flags of a target_state: the process is a target, and what its probes saw. */
enum tlsprof_target_flags {
	TARGET_PROBED = 1 << 0,
	/* A handshake stage ran outside any handshake call (or I/O call driving one): the process's handshakes
	 * run inside SSL_read/SSL_write, which user space then probes too. */
	TARGET_UNFRAMED_WORK = 1 << 1,
	/* No TLS code tlsprof can probe: its handshakes are counted from its sockets alone (EVENT_WIRE_END). */
	TARGET_WIRE_ONLY = 1 << 2,
};

/* Which processes join the recording as they start (rodata `follow`): the kernel makes them targets before
 * they run, and tells user space (EVENT_PROCESS). */
enum tlsprof_follow {
	/* A target's new processes (fork, not new threads). */
	FOLLOW_CHILDREN = 1 << 0,
	/* A process that runs a program named in map followed_comms (--comm). */
	FOLLOW_COMMS = 1 << 1,
	/* Every process that runs TLS code: the first hit of an FF_ANY_PROCESS probe (--all). Every exec is told
	 * to user space, which looks for TLS code in the new program itself. */
	FOLLOW_ALL = 1 << 2,
};

/* How a process came to user space's notice (process_event.how). */
enum tlsprof_process_how {
	/* A target forked it: it is a target. */
	PROCESS_FORKED = 1,
	/* It ran a new program: a target, or one FOLLOW_COMMS made one, or (FOLLOW_ALL) any process. */
	PROCESS_EXECED = 2,
	/* Its first hit of an FF_ANY_PROCESS probe made it a target (FOLLOW_ALL). */
	PROCESS_RAN_TLS = 3,
	/* A target mapped code of a file (FOLLOW_ALL: any process, one not in known_files): a library it loads,
	 * which may be a TLS library. */
	PROCESS_MAPPED_CODE = 4,
};

/* A file as the kernel names it: its inode and its filesystem's device (MKDEV(major, minor), the kernel's
 * encoding: major << 20 | minor). */
struct file_key {
	__u64 ino;
	__u32 dev;
	__u32 pad;
};

/* What runs tlsprof's programs in a target besides its probes (target_state.own_ns). */
enum tlsprof_own {
	/* The CPU samplers' interrupts (stacks; the trap sampler while the probes are attached). */
	OWN_SAMPLER = 0,
	/* The scheduler's switches of its threads that ran a stage (sched_switch, as one is switched out). */
	OWN_SCHEDULER = 1,
	/* Its accept, accept4 and connect calls (the connection counter, attached throughout). */
	OWN_CONNECTIONS = 2,
	/* Its socket writes and reads while ServerHellos are captured (--hello-capture windows). */
	OWN_CAPTURE = 3,
	OWN_KINDS = 4,
};

/* Values of the targets map: one per process being profiled. */
struct target_state {
	/* Connections the process accepted or opened (accept/accept4/connect returning a socket or
	 * EINPROGRESS): counted all the time, without a trap, to scale the handshakes seen in probe windows. */
	__u64 connections;
	/* Scheduler slices of its threads that ran a stage, each from switch-in to switch-out: their length by
	 * the kernel's task clock (sum_exec_runtime), and that plus what the run queue left out of it (the
	 * hypervisor's steal time; interrupts, where the kernel accounts them), which the stage clocks leave out
	 * too. User space states the share left out. */
	__u64 slices_ns;
	__u64 slices_task_ns;
	/* enum tlsprof_target_flags */
	__u8 flags;
	__u8 pad[7];
	/* tlsprof's programs other than the probes, where they run in this process's threads: their run time
	 * (ns, by the BPF clock, from their first instruction to their last) and their runs, by enum
	 * tlsprof_own. Their interrupt's or tracepoint's own entry is not in it. */
	__u64 own_ns[OWN_KINDS];
	__u64 own_runs[OWN_KINDS];
	/* CPU time of its threads that exited (their task clocks at exit): what a process that ended before user
	 * space read its CPU clock ran. */
	__u64 exited_cpu_ns;
};

/* Stage rules both sides apply. A derive entered directly inside one of these stages (a bit per stage id)
 * is that stage's work and takes its stage: OpenSSL 1.1.1 runs TLS 1.3's HKDF through EVP_PKEY_derive, from
 * the key schedule and from session tickets. Its secret is not the key exchange's. */
enum tlsprof_stage_rules {
	DERIVE_ABSORBED_BY = (1 << STAGE_KEY_SCHEDULE) | (1 << STAGE_RESUME),
};

/* Attach cookie layout, low bits first: function id (16 bits) | stage (8) | 1-based argument that is NULL
 * for a length query (8) | flags (28) | site (4: enum tlsprof_site). User space packs cookies with these
 * shifts (src/catalogue). */
enum tlsprof_cookie_shift {
	COOKIE_STAGE_SHIFT = 16,
	COOKIE_NULL_ARG_SHIFT = 24,
	COOKIE_FLAGS_SHIFT = 32,
	COOKIE_SITE_SHIFT = 60,
};

/* Where in its function a probe sits. */
enum tlsprof_site {
	SITE_ENTRY = 0,
	/* A return instruction, or a jump out of the function (a tail call), of FF_GO_ABI code: the stack
	 * pointer is back where it was at entry, the result in RAX. */
	SITE_EXIT = 1,
	/* In the caller of FF_GO_ABI code, after the call returned (the first instruction there that the kernel
	 * emulates): the stack pointer is one slot above where it was at entry. */
	SITE_RETURNED = 2,
	/* As SITE_RETURNED, at a caller learned at run time (FF_GO_LEARN_RETURN), the result registers RAX and
	 * RBX still as the callee left them: it ends whichever call returned there (an interface's or a function
	 * value's call site may call several functions), directly or through a caller that returned at once
	 * (`return signer.Sign(...)`, a method value's wrapper): the outermost frame below it. */
	SITE_LEARNED = 3,
};
#define COOKIE_FUNC(c) ((__u16)((c)&0xffff))
#define COOKIE_STAGE(c) ((__u8)(((c) >> COOKIE_STAGE_SHIFT) & 0xff))
#define COOKIE_NULL_ARG(c) ((__u8)(((c) >> COOKIE_NULL_ARG_SHIFT) & 0xff))
#define COOKIE_FLAGS(c) ((__u32)(((c) >> COOKIE_FLAGS_SHIFT) & 0xfffffff))
#define COOKIE_SITE(c) ((__u8)(((c) >> COOKIE_SITE_SHIFT) & 0xf))

/* Where an OpenSSL build keeps a connection's handshake state and protocol version in its SSL object, as byte
 * offsets read off its own SSL_get_state and SSL_version (map ssl_layouts), and a word there that must be 0 for
 * the object to be a TLS connection (OpenSSL 3.5's object type; -1: none). A handshake call that fails after
 * its handshake completed (a TLS 1.3 server whose client left before its session tickets were written) is
 * told from one that failed in it by these. */
struct ssl_layout {
	__s32 state;
	__s32 version;
	__s32 guard;
	__u32 pad;
};

/* The OpenSSL values the layout's words are compared with (ssl.h: OSSL_HANDSHAKE_STATE; TLS1_3_VERSION is
 * 0x0304). A state of TLS_ST_OK is a completed handshake; a TLS 1.3 server writes its session tickets after the
 * client's Finished, in the same call: a failure there comes after the handshake. */
enum tlsprof_openssl_values {
	OSSL_ST_OK = 1,
	OSSL_ST_SW_SESSION_TICKET = 33,
	OSSL_TLS1_3_VERSION = 772,
};

/* Call-tree node: the path of function ids from the outermost stage frame down. */
struct tree_key {
	__u32 tgid;
	__u16 depth;
	__u16 funcs[TLSPROF_MAX_DEPTH];
};

struct tree_val {
	__u64 calls;
	__u64 cpu_ns;
	/* Probe hits inside these calls (not their own entry and return): each cost the thread CPU that the
	 * figures above include and user space removes with the calibrated cost of a hit. */
	__u64 nested_hits;
	/* Entries of FF_STEPPED functions inside these calls, their own included (the second trap comes after
	 * the entry's program, within the call): each cost a trap more than a hit. */
	__u64 nested_stepped;
};

/* Upper bounds of a stack sample's variable parts: --stack-bytes is at most TLSPROF_MAX_STACK_BYTES. */
#define TLSPROF_MAX_STACK_BYTES 65536
#define TLSPROF_MAX_KERNEL_FRAMES 64

/* How the sampler captures user stacks (--call-graph). */
enum tlsprof_call_graph {
	/* A copy of the user stack from sp, unwound in user space with .eh_frame/.debug_frame. */
	CALL_GRAPH_DWARF = 0,
	/* Return addresses found by following frame pointers in the kernel. */
	CALL_GRAPH_FP = 1,
};

/* One CPU sample of a target thread, streamed; only the first stack_len bytes of stack are sent. */
struct stack_sample {
	__u32 tgid;
	__u32 tid;
	__u8 depth;
	__u8 in_kernel;
	__u16 kernel_frames;
	__u32 stack_len;
	__u16 funcs[TLSPROF_MAX_DEPTH];
	/* User registers at the sample (at kernel entry when the sample hit the kernel). */
	__u64 ip;
	__u64 sp;
	__u64 bp;
	/* Where each stage frame's return address sits on the stack, and its value: a uretprobe replaces it
	 * with a trampoline address that no unwinder can follow. */
	__u64 ret_slots[TLSPROF_MAX_DEPTH];
	__u64 ret_addrs[TLSPROF_MAX_DEPTH];
	/* Each stage frame's entry ip and bp: with ret_slots, the registers at its entry, from which user space
	 * restarts unwinding when code without correct unwind tables (hand-written assembly) stops it. */
	__u64 entry_ips[TLSPROF_MAX_DEPTH];
	__u64 entry_bps[TLSPROF_MAX_DEPTH];
	__u64 kernel_ips[TLSPROF_MAX_KERNEL_FRAMES];
	/* CALL_GRAPH_DWARF: stack bytes from sp; CALL_GRAPH_FP: user return addresses, innermost first. */
	__u8 stack[TLSPROF_MAX_STACK_BYTES];
};

/* A sample of the trap sampler taken in the kernel: its kernel stack, for user space to tell whether it is in
 * the probes' traps (record/duty/traps.rs). */
struct trap_sample {
	__u32 frames;
	__u32 pad;
	__u64 kernel_ips[TLSPROF_MAX_KERNEL_FRAMES];
};

/* Records of the handshakes ring buffer, told apart by their first field. */
enum tlsprof_event_kind {
	EVENT_HANDSHAKE = 1,
	EVENT_HELLO = 2,
	/* A ClientHello, or the rest of one a read cut short: only its offer of resumption is read. */
	EVENT_CLIENT_HELLO = 3,
	/* A return address an FF_GO_LEARN_RETURN function was called from, new to go_returns. */
	EVENT_GO_RETURN = 4,
	/* A process joined the recording, or ran a new program (struct process_event). */
	EVENT_PROCESS = 5,
	/* A connection's ClientHello (or the rest of one) and its ServerHello flight as they crossed a target's
	 * socket, followed by (process, fd) whatever the TLS library (hello_event, `ssl`: the connection's
	 * number, wire_event.conn). */
	EVENT_WIRE_CLIENT_HELLO = 6,
	EVENT_WIRE_SERVER_HELLO = 7,
	/* A handshake followed on the wire ended (struct wire_event). */
	EVENT_WIRE_END = 8,
	/* A target's datagram that begins with a QUIC Initial or Handshake packet (hello_event, `ssl`: 1 when the
	 * target received it, 0 when it sent it): user space opens its Initial packets (their keys are public) for
	 * the hellos, and follows the connection by its IDs. */
	EVENT_QUIC_DATAGRAM = 9,
	/* The start of a QUIC connection's hello as its TLS library took it (hello_event, `ssl`: the connection;
	 * FF_QUIC_HELLO). */
	EVENT_QUIC_CONN = 10,
};

/* Records of the processes ring buffer. */
struct process_event {
	__u32 kind;
	__u32 tgid;
	/* PROCESS_FORKED: the target that forked it. */
	__u32 parent;
	/* enum tlsprof_process_how */
	__u32 how;
	/* When it started (CLOCK_BOOTTIME, ns): /proc/PID/stat's start time, to tell it from a later process with
	 * its pid. */
	__u64 start_ns;
	char comm[16];
	/* PROCESS_MAPPED_CODE: the file. */
	struct file_key file;
};

/* A return address an FF_GO_LEARN_RETURN function was called from, in a process (map go_returns). */
struct go_return_key {
	__u32 tgid;
	__u16 func;
	__u16 pad;
	__u64 addr;
};

/* An FF_GO_LEARN_RETURN function of a process (map go_calls: its calls since it last reported a new caller). */
struct go_calls_key {
	__u32 tgid;
	__u16 func;
	__u16 pad;
};

struct go_return_event {
	__u32 kind;
	__u32 tgid;
	__u64 addr;
	/* The caller's own return address (its frame pointer's slot above): where the call ends if the caller
	 * returns at once. 0 if unreadable. */
	__u64 outer;
	__u16 func;
	__u16 pad[3];
};

/* Bytes of a connection's ServerHello flight kept (with TLS 1.2, the certificate and ServerKeyExchange
 * that follow it: enough for a chain of a few certificates). */
#define TLSPROF_HELLO_BYTES 4096

/* The ServerHello or ClientHello of a connection as it crossed the socket: handshake bytes, sent in the clear.
 * A ClientHello is tied to its connection through the socket: the ServerHello that follows on the same fd. */
struct hello_event {
	__u32 kind;
	__u32 tgid;
	__u64 ssl;
	__u32 len;
	/* 1: data starts with the handshake message (the 5-byte record header was read separately). */
	__u32 body_only;
	__s32 fd;
	/* EVENT_CLIENT_HELLO: 1 when data continues the ClientHello the last event of this fd began. */
	__u32 continued;
	/* The target's flags (enum tlsprof_target_flags) as it crossed. */
	__u32 target_flags;
	__u32 pad;
	__u8 data[TLSPROF_HELLO_BYTES];
};

/* How a handshake ended. */
enum tlsprof_outcome {
	OUTCOME_COMPLETED = 0,
	/* It did work (a stage inside it: keygen, sign, ...) but the connection ended (SSL_free, or its SSL *
	 * started a new connection) before it completed: the peer went away, or it failed. */
	OUTCOME_ABANDONED = 1,
};

/* Emitted once per connection: when its handshake completes, or when the connection ends with an
 * abandoned one. */
struct handshake_event {
	__u32 kind;
	__u32 tgid;
	__u64 ssl;
	/* FF_ROLE_SERVER, FF_ROLE_CLIENT or 0 when no function told. */
	__u16 role;
	/* FF_PRIVATE_KEY_OP | FF_PEER_CERT_CHECK seen during the handshake. */
	__u16 cert_ops;
	__u64 cpu_ns;
	/* Outermost handshake calls, and the probe hits inside them (see tree_val.nested_hits). */
	__u32 calls;
	__u32 nested_hits;
	__u32 nested_stepped;
	/* Length of the last signature made or checked, and of the shared secret; 0 when none was seen. */
	__u16 sig_len;
	__u16 secret_len;
	/* enum tlsprof_outcome. */
	__u16 outcome;
	/* Length of the secret an FF_SECRET_LEN_RET function returned; 0 when none was seen. */
	__u16 returned_secret_len;
	/* An abandoned handshake: from the start of its first call that did work (a stage other than the
	 * handshake's own) to its end. 0 for a completed one. */
	__u64 work_to_end_ns;
	/* The key its ServerHello was captured under, where not `ssl`: a client's first flight's
	 * (FF_FIRST_FLIGHT), read before its connection was known. 0: `ssl`. */
	__u64 hello_ssl;
};

/* A socket of a target (map wire_conns): connections are followed on the wire by process and fd, on whichever
 * thread calls. */
struct wire_key {
	__u32 tgid;
	__s32 fd;
};

/* A handshake seen on the wire ended: completed when the client's first encrypted record crossed after the
 * ServerHello (TLS 1.3: an application-data record, its Finished; TLS 1.2: the handshake record after its
 * ChangeCipherSpec), abandoned when the socket closed (or was reused) after the ServerHello, before that. */
struct wire_event {
	__u32 kind;
	__u32 tgid;
	/* The connection's number, as in its hello events' `ssl`. */
	__u64 conn;
	/* FF_ROLE_SERVER: the target read the ClientHello; FF_ROLE_CLIENT: it wrote it. */
	__u16 role;
	/* enum tlsprof_outcome. */
	__u16 outcome;
	/* The target's flags (enum tlsprof_target_flags) when it ended. */
	__u32 target_flags;
	/* The socket. */
	__s32 fd;
	__u32 pad;
	/* An abandoned one: from its ServerHello to its end; a completed one: from its ClientHello to its end
	 * (one is followed when both fall inside the programs' attachment). */
	__u64 hello_to_end_ns;
};

/* A hello's first bytes: its message header (4), legacy_version (2) and random (32). */
#define QUIC_HELLO_RANDOM_END 38

/* Indexes into the stats array: everything dropped or unmatched is counted, never hidden. */
enum tlsprof_stat {
	STAT_TREE_DROPS = 0,
	/* Samples the stack ring buffer had no room for. */
	STAT_SAMPLE_DROPS = 1,
	STAT_HANDSHAKE_DROPS = 2,
	STAT_DEPTH_OVERFLOW = 3,
	STAT_THREAD_DROPS = 4,
	STAT_CONN_DROPS = 5,
	STAT_SAMPLES = 6,
	/* Every probe hit on a target (entries and returns): what the probes cost the targets. */
	STAT_PROBE_HITS = 7,
	/* Frames dropped because their function had returned unseen (a longjmp, probes attached mid-call, or Go
	 * code called from a caller not probed yet: FF_GO_LEARN_RETURN). */
	STAT_MISSED_RETURNS = 8,
	/* Entries of FF_STEPPED functions on a target (also in STAT_PROBE_HITS): each a second trap. */
	STAT_STEPPED_HITS = 9,
	/* Entries of handshake stages (key exchange, signature, verification, key schedule, resumption) outside
	 * any handshake call or I/O call driving one: their handshakes are not counted (TARGET_UNFRAMED_WORK). */
	STAT_UNFRAMED_WORK = 10,
	/* Samples of the targets the trap sampler took, and those of them in the kernel its ring buffer had no
	 * room for. */
	STAT_TRAP_SAMPLES = 11,
	STAT_TRAP_SAMPLE_DROPS = 12,
	/* Hits of FF_ANY_PROCESS probes in processes that are not targets (not in STAT_PROBE_HITS): what they cost
	 * processes outside the recording. */
	STAT_OTHER_HITS = 13,
	/* Processes that joined in the kernel but whose event the processes ring buffer had no room for, or that
	 * the targets map had no room for. */
	STAT_PROCESS_DROPS = 14,
	/* Handshakes followed on the wire that were given up: a record header split across socket calls, more
	 * records in one call than are read, or an event the ring buffer had no room for. */
	STAT_WIRE_LOST = 15,
	/* Hits of Go's scheduler probes (FF_G_RUN, FF_G_STOP, FF_G_END; also in STAT_PROBE_HITS): as many as the
	 * program switches goroutines, whether or not it makes handshakes. */
	STAT_SCHEDULER_HITS = 16,
	STAT_COUNT = 17,
};

#endif
