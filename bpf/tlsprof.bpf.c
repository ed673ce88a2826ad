// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Kernel side of tlsprof: stage frames from uprobes, per-thread on-CPU time from sched_switch, CPU samples. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "tlsprof.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by user space before load. */
const volatile __u32 stack_bytes = 16384;
const volatile __u32 call_graph = CALL_GRAPH_DWARF;
/* enum tlsprof_follow: which processes join as they start. */
const volatile __u32 follow = FOLLOW_CHILDREN;
/* tlsprof's own process, which never joins. */
const volatile __u32 self_tgid = 0;
/* The --max-overhead duty cycle, set by user space: odd while the stage probes are paused. Attaching and
 * detaching dozens of uprobes takes milliseconds, one function at a time; the programs ignore everything while
 * the epoch is odd, so a window starts and ends for all functions at once. Frames and connections of an
 * earlier window saw only part of their calls: they are dropped, not finished. */
volatile __u32 probe_epoch = 0;

static __always_inline bool probes_paused(void)
{
	return probe_epoch & 1;
}

struct frame {
	__u64 sp;
	__u64 start_cpu_ns;
	/* The thread's hit count just after this frame's entry, and its stepped-entry count just before it (the
	 * entry's own second trap comes after the program, within the frame). */
	__u64 hits_at_entry;
	__u64 stepped_at_entry;
	/* A Go frame's return address (a native frame's is found by the sampler); ip and bp at entry. */
	__u64 ret_addr;
	__u64 entry_ip;
	__u64 entry_bp;
	/* Argument 3 at entry: where some functions return a length (see FF_*_LEN_*). */
	__u64 arg3;
	__u16 func;
	__u8 stage;
	/* An FF_IO_DRIVER call that holds the thread's connection (thread_state.ssl). */
	__u8 drives;
	/* The function's FF_* flags, for an exit that serves several functions (SITE_LEARNED). */
	__u32 flags;
};

/* The stage frames and on-CPU clock of a thread, or of a goroutine (Go targets, goroutine set). */
struct thread_state {
	/* On-CPU time accumulated up to last_in; the thread is on a CPU since last_in when running. A goroutine
	 * runs on thread `thread` while running, since that thread's clock read last_in. */
	__u64 cpu_ns;
	__u64 last_in;
	/* The on-CPU time last read while running (thread_cpu_now): the clock never goes below it. */
	__u64 cpu_read;
	/* A thread: the goroutine running on it (0: none seen). A goroutine: 1. */
	__u64 g;
	__u32 thread;
	__u32 goroutine;
	/* SSL * of the handshake this thread is inside, 0 outside one; and of the last one it was inside. */
	__u64 ssl;
	__u64 last_ssl;
	/* Buffer and fd of the read() in progress, and the record type of the last 5-byte read (a record header). */
	__u64 read_buf;
	__s32 read_fd;
	__u32 last_header_type;
	/* A ClientHello read cut short on fd client_hello_fd inside a handshake call on client_hello_ssl: its bytes
	 * still to come, read from the next reads of that fd inside a handshake call on the same SSL *. */
	__u64 client_hello_ssl;
	__s32 client_hello_fd;
	__u32 client_hello_left;
	/* The connection of the last FF_CONN_CURRENT call: the one the handshake steps that follow belong to. */
	__u64 current_conn;
	/* A fatal alert was sent inside the current outermost handshake call. */
	__u32 alerted;
	/* A first flight (FF_FIRST_FLIGHT) waits for its connection. */
	__u32 first_flight;
	/* Probe hits on this thread so far, and the entries among them that were single-stepped: the hits inside
	 * a frame are what its figures must be corrected for. */
	__u64 hits;
	__u64 stepped;
	__u32 running;
	__u32 depth;
	__u32 epoch;
	/* A stage other than the handshake's own ran inside the current outermost handshake call (inside an
	 * FF_IO_DRIVER call: a handshake stage). */
	__u32 worked;
	/* thread_state.ssl was set by an FF_IO_DRIVER call, not a handshake call. */
	__u32 driving;
	/* The epoch in which this thread was last seen outside any handshake call (a connection starting or
	 * ending, or an outermost handshake call entered): until then, a window that opened in the middle of a
	 * handshake call would make its stages look unframed. */
	__u32 settled_epoch;
	/* The kernel's task clock (sum_exec_runtime) at the thread's last switch-out, 0 before the first: it
	 * stands still while the thread is off the CPU, so it is also the clock's value at the next switch-in. */
	__u64 task_clock_out;
	/* The time its CPU's run queue had left out of task clocks (rq clock minus rq clock_task: steal and
	 * interrupt time) when the thread last switched in. */
	__u64 rq_left_out_in;
	/* The epoch its clock (running, last_in, task_clock_out, rq_left_out_in) was last kept in: the scheduler
	 * program skips every switch while the probes are paused, so a clock of an earlier epoch is stale. */
	__u32 clock_epoch;
	/* The index of the frame pop_frame closes, read back (see there). */
	__u32 popped;
	struct frame frames[TLSPROF_MAX_DEPTH];
};

struct conn_key {
	__u32 tgid;
	__u32 pad;
	__u64 ssl;
};

struct conn_state {
	__u64 handshake_cpu_ns;
	__u32 handshake_calls;
	__u32 handshake_hits;
	__u32 handshake_stepped;
	__u16 role;
	__u16 cert_ops;
	__u16 sig_len;
	__u16 secret_len;
	__u16 returned_secret_len;
	__u32 epoch;
	/* When the first handshake call with such work began (bpf_ktime at its return less its CPU time: such a
	 * call runs on the CPU): how long an abandoned handshake took to end after it tells user space its chance
	 * to fall inside the window whole. */
	__u64 worked_ns;
	__u8 counted;
	/* A stage other than the handshake's own ran inside it (keygen, sign, ...): the server paid for it. */
	__u8 worked;
	/* The ServerHello was captured. */
	__u8 hello;
	/* The key it was captured under, where not this connection's (see handshake_event.hello_ssl). */
	__u64 hello_ssl;
};

/* Make the boundary types visible in BTF so the skeleton emits them for user space. */
struct tree_key _tree_key = {};
struct tree_val _tree_val = {};
struct target_state _target_state = {};
struct stack_sample _stack_sample = {};
struct trap_sample _trap_sample = {};
enum tlsprof_call_graph _call_graph = CALL_GRAPH_DWARF;
struct handshake_event _handshake_event = {};
struct hello_event _hello_event = {};
struct wire_event _wire_event = {};
struct go_return_event _go_return_event = {};
struct ssl_layout _ssl_layout = {};
struct process_event _process_event = {};
enum tlsprof_event_kind _event_kind = EVENT_HANDSHAKE;
enum tlsprof_stage _stage = STAGE_NONE;
enum tlsprof_func_flags _func_flags = FF_SSL_ARG;
enum tlsprof_stat _stat = STAT_TREE_DROPS;
enum tlsprof_outcome _outcome = OUTCOME_COMPLETED;
enum tlsprof_site _site = SITE_ENTRY;
enum tlsprof_target_flags _target_flags = TARGET_PROBED;
enum tlsprof_openssl_values _openssl_values = OSSL_ST_OK;
enum tlsprof_follow _follow = FOLLOW_CHILDREN;
enum tlsprof_process_how _process_how = PROCESS_FORKED;

/* tgid -> target_state: processes being profiled; the sampler ignores everyone else. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct target_state);
} targets SEC(".maps");

/* tid -> stage frames and on-CPU clock of every thread that entered a stage; LRU so dead threads age out. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct thread_state);
} threads SEC(".maps");

struct goroutine_key {
	__u32 tgid;
	__u32 pad;
	__u64 g;
};

/* (tgid, g) -> stage frames and on-CPU clock of a goroutine that entered a stage (Go targets): a goroutine
 * moves between threads and shares them with others. Deleted when it ends; LRU for ends not seen. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct goroutine_key);
	__type(value, struct thread_state);
} goroutines SEC(".maps");

/* A hello being streamed: built here, too big for the BPF stack, and sent as long as its bytes are (a hello
 * is often a few hundred bytes of the room it has). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hello_event);
} hello_scratch SEC(".maps");

/* One all-zero thread_state, the template for new threads: too big for the 512-byte BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct thread_state);
} thread_zero SEC(".maps");

/* (tgid, SSL *) -> handshake CPU, role and certificate operations, so each connection counts once. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct conn_key);
	__type(value, struct conn_state);
} conns SEC(".maps");

/* call-tree path -> calls and CPU; aggregated here so user space reads it once at the end. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct tree_key);
	__type(value, struct tree_val);
} tree SEC(".maps");

/* CPU samples with their stacks, streamed: user space unwinds and aggregates them, and sizes this ring for
 * its CPUs, sampling rate and stack copy size. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} stacks SEC(".maps");

/* Kernel stacks of the trap sampler's samples (half a KiB each), taken only while the stage probes are
 * attached. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} trap_samples SEC(".maps");

/* tid -> the thread's stack mapping, as bpf_find_vma last found it (see copy_user_stack). */
struct stack_range {
	__u64 start;
	__u64 end;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct stack_range);
} stack_ranges SEC(".maps");

/* Scratch space for one stack_sample per CPU, indexed by CPU: too big for the BPF stack, and above the
 * 32 KiB value limit of per-CPU maps. User space sizes it to the number of possible CPUs. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_sample);
} sample_scratch SEC(".maps");

/* Records are submitted without waking user space (BPF_RB_NO_WAKEUP), go_callers' aside: it drains the ring
 * buffers on its own clock, so a busy target does not cost a wakeup of tlsprof per event. */

/* Completed handshakes and captured ClientHellos and ServerHellos (enum tlsprof_event_kind), in order: rare
 * enough to stream. A hello takes the bytes it has (mostly 0.2-2 KiB): 4 MiB holds more than a second of both
 * at 1,000 handshakes/s, ten polls of user space. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} handshakes SEC(".maps");

/* Callers of FF_GO_LEARN_RETURN functions not seen before (EVENT_GO_RETURN): the one ring buffer whose records
 * wake user space, which probes where the caller resumes at once. Until then the function's return
 * instructions stay probed, and each return is a single step. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 10);
} go_callers SEC(".maps");

/* Processes that joined or ran a new program (EVENT_PROCESS): they wake user space, which looks at them at once
 * (a process that starts may make its handshakes a few milliseconds later). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 << 10);
} processes SEC(".maps");

/* Files whose code needs no look from user space when a process that is no target maps it (FOLLOW_ALL; the
 * value is unused): it has no TLS code, or its probes are in every process already (FF_ANY_PROCESS). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct file_key);
	__type(value, __u8);
} known_files SEC(".maps");

/* Program names (comm, NUL-padded) whose processes join as they run them (FOLLOW_COMMS: --comm). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, char[16]);
	__type(value, __u8);
} followed_comms SEC(".maps");

/* Where FF_GO_LEARN_RETURN functions were called from, each reported once (the value is unused). Bounded: a
 * return address found when it is full is not reported, and that caller's calls end at the function's return
 * instructions while their probes last. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct go_return_key);
	__type(value, __u32);
} go_returns SEC(".maps");

/* Each FF_GO_LEARN_RETURN function's calls since it last reported a new caller: user space takes its return
 * instructions' probes away once enough have come from callers it probes. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct go_calls_key);
	__type(value, __u64);
} go_calls SEC(".maps");

/* Function id -> where its library keeps a connection's handshake state (struct ssl_layout): for the OpenSSL
 * functions that take the SSL *, in builds whose accessors user space could read. Looked up only when a
 * handshake call fails. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct ssl_layout);
} ssl_layouts SEC(".maps");

/* enum tlsprof_stat -> count, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline void count_stat(__u32 stat)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &stat);

	if (v)
		(*v)++;
}

/* What the run queue of this CPU has left out of task clocks so far (steal and interrupt time), reached through
 * the current task's CFS queue (its per-CPU `runqueues` is not in kallsyms); 0 where it cannot be read. Both
 * clocks are brought up to date together, at each scheduling, so their difference moves only by what was left
 * out. Read by plain loads through the task's BTF pointer, not a bpf_probe_read_kernel call per field: each
 * probe hit and scheduler switch reads it. */
static __always_inline __u64 rq_left_out(void)
{
	struct cfs_rq *cfs_rq;
	struct rq *rq;

	if (!bpf_core_field_exists(((struct cfs_rq *)0)->rq))
		return 0;
	cfs_rq = bpf_get_current_task_btf()->se.cfs_rq;
	if (!cfs_rq)
		return 0;
	rq = cfs_rq->rq;
	if (!rq)
		return 0;
	return rq->clock - rq->clock_task;
}

/* What the run queue has left out since the running thread `ts` switched in, `on_cpu` ago. */
static __always_inline __u64 left_out_since_in(struct thread_state *ts, __u64 on_cpu)
{
	__u64 left_out = rq_left_out(), in = ts->rq_left_out_in;

	if (!left_out || !in || left_out < in)
		return 0;
	return left_out - in < on_cpu ? left_out - in : on_cpu;
}

/* A thread's on-CPU time, as its task clock counts it: without the steal and interrupt time that the kernel
 * leaves out. That is noted by the run queue at its clock updates, at scheduling and ticks; the stage figures
 * lose what was noted while their frame ran. (Scaling by a whole slice's ratio would not do: the hypervisor
 * takes the CPU mostly where the guest exits to it, as when waking a thread on another CPU, not evenly.) */
/* A running thread's clock, `on_cpu` after its switch-in, less `left_out` of that time. */
static __always_inline __u64 running_cpu(struct thread_state *ts, __u64 on_cpu, __u64 left_out)
{
	__u64 cpu = ts->cpu_ns + on_cpu - left_out;

	/* Steal noted now may have been taken before an earlier reading: the clock stands still, never goes back. */
	if (cpu < ts->cpu_read)
		cpu = ts->cpu_read;
	ts->cpu_read = cpu;
	return cpu;
}

static __always_inline __u64 thread_cpu_now(struct thread_state *ts, __u64 now)
{
	__u64 on_cpu = now - ts->last_in;

	if (!ts->running)
		return ts->cpu_ns;
	return running_cpu(ts, on_cpu, left_out_since_in(ts, on_cpu));
}

/* A thread's or goroutine's on-CPU time now. */
static __always_inline __u64 task_cpu_now(struct thread_state *ts, __u64 now)
{
	struct thread_state *t;
	__u32 tid = ts->thread;

	if (!ts->goroutine)
		return thread_cpu_now(ts, now);
	if (!ts->running)
		return ts->cpu_ns;
	t = bpf_map_lookup_elem(&threads, &tid);
	if (!t)
		return ts->cpu_ns;
	return ts->cpu_ns + thread_cpu_now(t, now) - ts->last_in;
}

static __always_inline __u64 arg_value(struct pt_regs *ctx, __u8 n)
{
	/* Read through bpf_probe_read_kernel (the _CORE variants): clang folds these branches into one load at
	 * a computed offset, which the verifier allows for memory but not for the context itself. */
	switch (n) {
	case 1:
		return PT_REGS_PARM1_CORE(ctx);
	case 2:
		return PT_REGS_PARM2_CORE(ctx);
	case 3:
		return PT_REGS_PARM3_CORE(ctx);
	case 4:
		return PT_REGS_PARM4_CORE(ctx);
	default:
		return 1;
	}
}

static __always_inline struct conn_state *conn_lookup(__u32 tgid, __u64 ssl, bool create)
{
	struct conn_key key = { .tgid = tgid, .ssl = ssl };
	struct conn_state *c = bpf_map_lookup_elem(&conns, &key);
	struct conn_state zero = { .epoch = probe_epoch };

	if (c && c->epoch != probe_epoch) {
		if (!create)
			return NULL;
		*c = zero;
	}
	if (c || !create)
		return c;
	if (bpf_map_update_elem(&conns, &key, &zero, BPF_NOEXIST) && bpf_map_lookup_elem(&conns, &key) == NULL) {
		count_stat(STAT_CONN_DROPS);
		return NULL;
	}
	return bpf_map_lookup_elem(&conns, &key);
}

static __always_inline void emit_handshake(__u32 tgid, __u64 ssl, struct conn_state *c, __u16 outcome)
{
	struct handshake_event *e;

	c->counted = 1;
	e = bpf_ringbuf_reserve(&handshakes, sizeof(*e), 0);
	if (!e) {
		count_stat(STAT_HANDSHAKE_DROPS);
		return;
	}
	e->kind = EVENT_HANDSHAKE;
	e->tgid = tgid;
	e->ssl = ssl;
	e->role = c->role;
	e->cert_ops = c->cert_ops;
	e->cpu_ns = c->handshake_cpu_ns;
	e->calls = c->handshake_calls;
	e->nested_hits = c->handshake_hits;
	e->nested_stepped = c->handshake_stepped;
	e->sig_len = c->sig_len;
	e->secret_len = c->secret_len;
	e->outcome = outcome;
	e->returned_secret_len = c->returned_secret_len;
	e->work_to_end_ns = outcome == OUTCOME_ABANDONED && c->worked_ns ? bpf_ktime_get_ns() - c->worked_ns : 0;
	e->hello_ssl = c->hello_ssl;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

/* An epoch no window has (windows' are even): a connection that ended. Its entry stays in the map, as one of an
 * earlier window does, until its SSL * starts another or the LRU takes it: an update or delete of an LRU map
 * entry costs a lock and a free-list move that a write in place does not, on every connection. */
#define CONN_ENDED 0xffffffffU

/* The connection at c (found under ssl) ends: a handshake of this window that did work and never completed is
 * reported as abandoned. */
static __always_inline void end_conn(__u32 tgid, __u64 ssl, struct conn_state *c)
{
	if (c->epoch != probe_epoch)
		return;
	if (c->worked && !c->counted)
		emit_handshake(tgid, ssl, c, OUTCOME_ABANDONED);
	c->epoch = CONN_ENDED;
}

/* Record what a function tells about its connection: its start, role and end. */
static __always_inline void note_conn_fact(__u64 ssl, __u32 tgid, __u32 flags)
{
	__u16 role = flags & (FF_ROLE_SERVER | FF_ROLE_CLIENT);
	struct conn_key key = { .tgid = tgid, .ssl = ssl };
	struct conn_state *c;

	if (!(flags & FF_SSL_ARG) || !ssl)
		return;
	if (flags & (FF_CONN_END | FF_CONN_START)) {
		struct conn_state fresh = { .role = role, .epoch = probe_epoch };

		c = bpf_map_lookup_elem(&conns, &key);
		/* A reused SSL * (SSL_clear, or an SSL_free the probes missed) ends the connection before it. */
		if (c)
			end_conn(tgid, ssl, c);
		if (!(flags & FF_CONN_START))
			return;
		if (!c && bpf_map_update_elem(&conns, &key, &fresh, BPF_NOEXIST) == 0)
			return;
		/* Not inserted: there already, or put there since the lookup above. */
		if (!c)
			c = bpf_map_lookup_elem(&conns, &key);
		if (c)
			*c = fresh;
		else
			count_stat(STAT_CONN_DROPS);
		return;
	}
	c = conn_lookup(tgid, ssl, true);
	if (c && role && !c->role)
		c->role = role;
}

/* The thread's next connection (FF_CONN_CURRENT) takes the first flight kept for it, if it has done no work
 * itself: a reused address whose handshake completed starts anew. */
static __always_inline void join_first_flight(__u32 tgid, __u32 tid, __u64 conn)
{
	struct conn_key key = { .tgid = tgid, .ssl = FIRST_FLIGHT_KEY | tid };
	struct conn_state *first = bpf_map_lookup_elem(&conns, &key);
	struct conn_state *c;

	if (!first || !conn)
		goto done;
	c = conn_lookup(tgid, conn, true);
	if (c && c->counted) {
		struct conn_state fresh = { .epoch = probe_epoch };

		*c = fresh;
	}
	if (c && c->handshake_calls == 0 && first->epoch == probe_epoch) {
		c->handshake_cpu_ns = first->handshake_cpu_ns;
		c->handshake_calls = first->handshake_calls;
		c->handshake_hits = first->handshake_hits;
		c->handshake_stepped = first->handshake_stepped;
		c->role = first->role;
		c->cert_ops |= first->cert_ops;
		c->worked = first->worked;
		c->worked_ns = first->worked_ns;
		if (first->hello) {
			c->hello = 1;
			c->hello_ssl = key.ssl;
		}
	}
done:
	bpf_map_delete_elem(&conns, &key);
}

/* Work only a handshake does: not the record layer's (an FF_IO_DRIVER call's own stage, or the MACs that
 * --all-probes counts in `sign` with no private-key flag). */
static __always_inline bool handshake_work(__u8 stage, __u32 flags)
{
	return stage == STAGE_KEYGEN || stage == STAGE_DERIVE || stage == STAGE_VERIFY || stage == STAGE_KEY_SCHEDULE ||
	       stage == STAGE_RESUME || (stage == STAGE_SIGN && (flags & FF_PRIVATE_KEY_OP));
}

/* Tells user space that process tgid joined, or ran a new program (enum tlsprof_process_how). */
static __always_inline bool tell_process(__u32 tgid, __u32 parent, __u32 how, __u64 start_ns, struct file_key *file)
{
	struct process_event *e = bpf_ringbuf_reserve(&processes, sizeof(*e), 0);

	if (!e) {
		count_stat(STAT_PROCESS_DROPS);
		return false;
	}
	e->kind = EVENT_PROCESS;
	e->tgid = tgid;
	e->parent = parent;
	e->how = how;
	e->start_ns = start_ns;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	e->file.ino = file ? file->ino : 0;
	e->file.dev = file ? file->dev : 0;
	e->file.pad = 0;
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	return true;
}

/* Makes process tgid a target from now on (its connections, stages and samples count) and tells user space;
 * false where the targets map has no room. */
static __always_inline bool join(__u32 tgid, __u32 parent, __u32 how, __u64 start_ns)
{
	struct target_state fresh = { .flags = TARGET_PROBED };

	if (tgid == self_tgid)
		return false;
	if (bpf_map_update_elem(&targets, &tgid, &fresh, BPF_NOEXIST) && !bpf_map_lookup_elem(&targets, &tgid)) {
		count_stat(STAT_PROCESS_DROPS);
		return false;
	}
	tell_process(tgid, parent, how, start_ns, NULL);
	return true;
}

/* Whether a probe hit is a target's: always for a process's own probes; for an FF_ANY_PROCESS probe, if the
 * process is a target, or (FOLLOW_ALL) joins as one now, running TLS code. The other processes' hits are counted
 * apart. */
static __always_inline bool target_hit(__u32 tgid, __u32 flags)
{
	if (!(flags & FF_ANY_PROCESS) || bpf_map_lookup_elem(&targets, &tgid))
		return true;
	if ((follow & FOLLOW_ALL) &&
	    join(tgid, 0, PROCESS_RAN_TLS, bpf_get_current_task_btf()->group_leader->start_boottime))
		return true;
	count_stat(STAT_OTHER_HITS);
	return false;
}

static __always_inline void note_unframed_work(__u32 tgid)
{
	struct target_state *target = bpf_map_lookup_elem(&targets, &tgid);

	/* Not a target: tlsprof's own calibration calls. */
	if (!target)
		return;
	count_stat(STAT_UNFRAMED_WORK);
	if (!(target->flags & TARGET_UNFRAMED_WORK))
		target->flags |= TARGET_UNFRAMED_WORK;
}

/* A certificate operation only full handshakes do, in the handshake of the thread's connection. */
static __always_inline void note_cert_ops(__u32 tgid, struct thread_state *ts, __u32 flags)
{
	struct conn_state *c;

	if (!(flags & (FF_PRIVATE_KEY_OP | FF_PEER_CERT_CHECK)) || !ts->ssl)
		return;
	c = conn_lookup(tgid, ts->ssl, true);
	if (c)
		c->cert_ops |= flags & (FF_PRIVATE_KEY_OP | FF_PEER_CERT_CHECK);
}

/* Opens a stage frame of a thread or goroutine; false when none was opened. sp: where the return address sits
 * (a goroutine's: its distance from the stack's top, see go_stack_pos); arg1: the function's first argument. */
static __always_inline bool push_frame(struct pt_regs *ctx, struct thread_state *ts, __u32 tgid, __u64 cookie, __u64 sp,
				       __u64 arg1, __u64 now)
{
	__u8 stage = COOKIE_STAGE(cookie);
	__u32 flags = COOKIE_FLAGS(cookie);
	bool stepped = flags & FF_STEPPED;
	__u8 drives = 0;
	struct frame *f;
	__u64 d;
	int i;

	if (ts->epoch != probe_epoch) {
		ts->depth = 0;
		ts->ssl = 0;
		ts->last_ssl = 0;
		ts->driving = 0;
		ts->epoch = probe_epoch;
	}
	/* A recorded frame whose return slot is below this call's has returned without us seeing it (an equal
	 * slot is a tail call: both frames are live). */
	d = ts->depth;
	for (i = TLSPROF_MAX_DEPTH - 1; i >= 0; i--) {
		if (i < d && ts->frames[i].sp < sp) {
			count_stat(STAT_MISSED_RETURNS);
			d = i;
		}
	}
	ts->depth = d;
	/* The call that held the connection is gone with them. */
	if (d == 0) {
		ts->ssl = 0;
		ts->driving = 0;
	}
	/* Read back, as in pop_frame: the verifier checks what follows once, not once for each depth. */
	d = *(volatile __u32 *)&ts->depth;
	/* Keeps clang from indexing frames[] with a copy of d the check below did not bound. */
	barrier_var(d);
	if (d >= TLSPROF_MAX_DEPTH) {
		count_stat(STAT_DEPTH_OVERFLOW);
		return false;
	}
	/* Go enters a function again from its start after growing the goroutine's stack (morestack): the
	 * same call, already open. */
	if ((flags & FF_GO_ABI) && d > 0 && ts->frames[d - 1].sp == sp && ts->frames[d - 1].func == COOKIE_FUNC(cookie))
		return false;

	/* See DERIVE_ABSORBED_BY. */
	if (stage == STAGE_DERIVE && d > 0 && d <= TLSPROF_MAX_DEPTH &&
	    (DERIVE_ABSORBED_BY & (1U << (ts->frames[d - 1].stage & 31))))
		stage = ts->frames[d - 1].stage;
	if (flags & FF_HS_STEP) {
		arg1 =
		    (flags & FF_FIRST_FLIGHT) ? FIRST_FLIGHT_KEY | (__u32)bpf_get_current_pid_tgid() : ts->current_conn;
		if (flags & FF_FIRST_FLIGHT)
			ts->first_flight = 1;
		flags |= FF_SSL_ARG;
		/* A first flight always starts anew: one kept from a connection that never came is abandoned. */
		if ((flags & FF_CONN_START) && !(flags & FF_FIRST_FLIGHT)) {
			struct conn_state *c = arg1 ? conn_lookup(tgid, arg1, false) : NULL;

			/* A handshake still under way (a second ClientHello after a retry request) goes on. */
			if (!c || !c->counted)
				flags &= ~FF_CONN_START;
		}
	}
	if (stage == STAGE_HANDSHAKE && (flags & FF_SSL_ARG) && arg1 && ts->ssl == 0) {
		ts->ssl = arg1;
		ts->last_ssl = ts->ssl;
		ts->worked = 0;
		ts->alerted = 0;
		ts->driving = 0;
		if (d == 0)
			ts->settled_epoch = probe_epoch;
		note_conn_fact(arg1, tgid, flags);
	} else if ((flags & FF_IO_DRIVER) && ts->ssl == 0) {
		ts->ssl = arg1;
		ts->last_ssl = ts->ssl;
		ts->worked = 0;
		ts->driving = 1;
		drives = 1;
	} else if (stage != STAGE_HANDSHAKE && ts->ssl) {
		if (!ts->driving || handshake_work(stage, flags))
			ts->worked = 1;
		/* Work only one side does tells the role where no function that takes the SSL * does. */
		if (flags & (FF_ROLE_SERVER | FF_ROLE_CLIENT))
			note_conn_fact(ts->ssl, tgid, FF_SSL_ARG | (flags & (FF_ROLE_SERVER | FF_ROLE_CLIENT)));
	} else if (d == 0 && handshake_work(stage, flags) && ts->settled_epoch == probe_epoch) {
		/* Go's handshakes all run inside its probed handshake functions (Conn.Read and Write start one
		 * there): Go crypto outside them is the program's own, or post-handshake (session tickets). */
		if (!(flags & FF_GO_ABI))
			note_unframed_work(tgid);
	}
	note_cert_ops(tgid, ts, flags);

	f = &ts->frames[d];
	f->sp = sp;
	/* Go frames: where the return address sits in the goroutine's stack right now (go_stack_pos). Only a Go
	 * frame's return address is read here: a native frame's return probe takes it from the stack, and the
	 * sampler finds it where the kernel keeps it (return_addresses_taken). */
	f->ret_addr = 0;
	if ((flags & FF_GO_ABI) && bpf_probe_read_user(&f->ret_addr, sizeof(f->ret_addr), (void *)PT_REGS_SP(ctx)))
		f->ret_addr = 0;
	f->entry_ip = PT_REGS_IP(ctx);
	f->entry_bp = PT_REGS_FP(ctx);
	f->arg3 = PT_REGS_PARM3(ctx);
	if ((flags & FF_GO_SIG_STACK_ARG) &&
	    bpf_probe_read_user(&f->arg3, sizeof(f->arg3), (void *)(PT_REGS_SP(ctx) + 16)))
		f->arg3 = 0;
	f->start_cpu_ns = task_cpu_now(ts, now);
	f->hits_at_entry = ts->hits;
	f->stepped_at_entry = ts->stepped - stepped;
	f->func = COOKIE_FUNC(cookie);
	f->stage = stage;
	f->drives = drives;
	f->flags = flags;
	ts->depth = d + 1;
	return true;
}

/* tid -> its thread_state, made on the thread's first probe hit: the thread is on a CPU now, running it. */
/* Picks up a thread's clock whose switches went unseen (an earlier epoch, or a new thread), from `now`: it is
 * on the CPU (a probe hit) or switching in, or else switching out (its task clock then stands still until its
 * next switch-in). A slice it was in the middle of is not whole: not counted. */
static __always_inline void clock_pick_up(struct thread_state *ts, bool running, __u64 now)
{
	ts->clock_epoch = probe_epoch;
	ts->running = running;
	ts->last_in = now;
	ts->rq_left_out_in = running ? rq_left_out() : 0;
	ts->task_clock_out = running ? 0 : bpf_get_current_task_btf()->se.sum_exec_runtime;
}

static __always_inline struct thread_state *thread_state_of(__u32 tid, __u64 now)
{
	struct thread_state *ts = bpf_map_lookup_elem(&threads, &tid);
	__u32 zero = 0;
	struct thread_state *fresh;

	if (ts) {
		if (ts->clock_epoch != probe_epoch)
			clock_pick_up(ts, true, now);
		return ts;
	}
	fresh = bpf_map_lookup_elem(&thread_zero, &zero);
	if (!fresh)
		return NULL;
	if (bpf_map_update_elem(&threads, &tid, fresh, BPF_NOEXIST) && bpf_map_lookup_elem(&threads, &tid) == NULL) {
		count_stat(STAT_THREAD_DROPS);
		return NULL;
	}
	ts = bpf_map_lookup_elem(&threads, &tid);
	if (!ts)
		return NULL;
	clock_pick_up(ts, true, now);
	return ts;
}

/* A stage function's entry, or a fact's; true when it opened a frame that its return closes. */
static __always_inline bool enter_stage(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u8 stage = COOKIE_STAGE(cookie);
	__u8 null_arg = COOKIE_NULL_ARG(cookie);
	__u32 flags = COOKIE_FLAGS(cookie);
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid, tgid = pid_tgid >> 32;
	struct thread_state *ts;
	__u64 now;
	bool stepped = flags & FF_STEPPED;

	if (!target_hit(tgid, flags))
		return false;
	count_stat(STAT_PROBE_HITS);
	if (stepped)
		count_stat(STAT_STEPPED_HITS);
	if (probes_paused())
		return false;
	ts = bpf_map_lookup_elem(&threads, &tid);
	if (ts) {
		ts->hits++;
		ts->stepped += stepped;
	}
	/* A call with a NULL output buffer only asks for a length: it is not an operation. */
	if (null_arg && arg_value(ctx, null_arg) == 0)
		return false;

	now = bpf_ktime_get_ns();
	if (!ts) {
		ts = thread_state_of(tid, now);
		if (!ts)
			return false;
		ts->hits = 1;
		ts->stepped = stepped;
	}
	if (stage == STAGE_NONE) {
		if (flags & FF_CONN_CURRENT) {
			ts->current_conn = PT_REGS_PARM2(ctx);
			if (ts->first_flight) {
				ts->first_flight = 0;
				join_first_flight(tgid, tid, ts->current_conn);
			}
		}
		if (flags & FF_FATAL_ALERT)
			ts->alerted = 1;
		/* A function that takes no SSL * tells its role to the connection whose handshake runs here. */
		if (!(flags & FF_SSL_ARG) && (flags & (FF_ROLE_SERVER | FF_ROLE_CLIENT)))
			note_conn_fact(ts->ssl, tgid, FF_SSL_ARG | (flags & (FF_ROLE_SERVER | FF_ROLE_CLIENT)));
		else
			note_conn_fact(PT_REGS_PARM1(ctx), tgid, flags);
		/* A connection starts or ends between handshake calls, never inside one. */
		if (flags & (FF_CONN_START | FF_CONN_END))
			ts->settled_epoch = probe_epoch;
		return false;
	}
	return push_frame(ctx, ts, tgid, cookie, PT_REGS_SP(ctx), PT_REGS_PARM1(ctx), now);
}

SEC("uprobe.multi")
int stage_enter(struct pt_regs *ctx)
{
	enter_stage(ctx);
	return 0;
}

/* Whether the handshake of connection ssl completed although the call of func that ran it failed: its state, as
 * the library keeps it (ssl_layouts), is past the peer's Finished. */
static __always_inline bool completed_anyway(__u64 ssl, __u16 func)
{
	__u32 key = func;
	struct ssl_layout *l = bpf_map_lookup_elem(&ssl_layouts, &key);
	__s32 state = 0, version = 0, guard = 0;

	if (!l || !ssl)
		return false;
	if (l->guard >= 0 && (bpf_probe_read_user(&guard, sizeof(guard), (void *)(ssl + l->guard)) || guard != 0))
		return false;
	if (bpf_probe_read_user(&state, sizeof(state), (void *)(ssl + l->state)) ||
	    bpf_probe_read_user(&version, sizeof(version), (void *)(ssl + l->version)))
		return false;
	return state == OSSL_ST_OK || (state == OSSL_ST_SW_SESSION_TICKET && version == OSSL_TLS1_3_VERSION);
}

static __always_inline void finish_handshake(bool ok, __u32 tgid, struct thread_state *ts, __u64 cpu_ns,
					     __u64 nested_hits, __u64 nested_stepped)
{
	__u64 ts_ssl = ts->ssl;
	struct conn_state *c = conn_lookup(tgid, ts_ssl, true);

	ts->ssl = 0;
	if (!c)
		return;
	c->handshake_cpu_ns += cpu_ns;
	c->handshake_calls++;
	c->handshake_hits += nested_hits;
	c->handshake_stepped += nested_stepped;
	if (ts->worked && !c->worked)
		c->worked_ns = bpf_ktime_get_ns() - cpu_ns;
	c->worked |= ts->worked;
	ts->worked = 0;
	if (!ok || c->counted)
		return;
	emit_handshake(tgid, ts_ssl, c, OUTCOME_COMPLETED);
}

/* An FF_IO_DRIVER call of func returns: the handshake work inside it is its connection's, and its success means
 * the handshake has completed (SSL_read/SSL_write return bytes, the _ex forms 1), as does a failure after it
 * (completed_anyway: the peer left once its handshake was done). */
static __always_inline void finish_io_driver(struct pt_regs *ctx, __u32 tgid, struct thread_state *ts, __u16 func,
					     __u64 cpu_ns, __u64 nested_hits, __u64 nested_stepped)
{
	__u64 ssl = ts->ssl;
	struct conn_state *c = conn_lookup(tgid, ssl, ts->worked);

	ts->ssl = 0;
	ts->driving = 0;
	if (!c) {
		ts->worked = 0;
		return;
	}
	if (ts->worked) {
		c->handshake_cpu_ns += cpu_ns;
		c->handshake_calls++;
		c->handshake_hits += nested_hits;
		c->handshake_stepped += nested_stepped;
		if (!c->worked)
			c->worked_ns = bpf_ktime_get_ns() - cpu_ns;
		c->worked = 1;
		ts->worked = 0;
	}
	if (c->worked && !c->counted && ((int)PT_REGS_RC(ctx) > 0 || completed_anyway(ssl, func)))
		emit_handshake(tgid, ssl, c, OUTCOME_COMPLETED);
}

/* Lengths that tell the certificate key (signature) and the key exchange (shared secret) of a handshake. */
static __always_inline void note_lengths(__u32 tgid, __u64 ssl, __u32 flags, __u64 arg3, long rc)
{
	struct conn_state *c = conn_lookup(tgid, ssl, false);
	__u64 len = arg3;

	if (!c)
		return;
	if (flags & FF_SECRET_LEN_RET) {
		if (rc > 0)
			c->returned_secret_len = rc;
		return;
	}
	if (flags & (FF_SIG_LEN_PTR | FF_SECRET_LEN_PTR)) {
		if (bpf_probe_read_user(&len, sizeof(len), (void *)arg3))
			return;
	}
	if (flags & FF_SECRET_LEN_PTR) {
		c->secret_len = len;
	} else {
		c->sig_len = len;
	}
}

/* The length of the Vec<u8> in the Rust Result at `slot` (FF_SIG_RESULT), or 0 where its capacity and length
 * differ: an error, or another layout. */
static __always_inline __u64 rust_vec_result_len(__u64 slot)
{
	__u64 words[4];

	if (bpf_probe_read_user(words, sizeof(words), (void *)slot) || words[1] != words[3])
		return 0;
	return words[3];
}

/* Closes the stage frame a return (or a Go exit site) ends: the one opened at entry_sp by the same function.
 * ok: the function succeeded (what a handshake's completion is judged by). */
static __always_inline int pop_frame(struct pt_regs *ctx, struct thread_state *ts, __u32 tgid, __u64 cookie,
				     __u64 entry_sp, bool ok, __u64 now)
{
	__u16 func = COOKIE_FUNC(cookie);
	__u32 flags = COOKIE_FLAGS(cookie);
	bool any_func = COOKIE_SITE(cookie) == SITE_LEARNED;
	struct tree_key key = {};
	struct tree_val *val;
	__u64 total, nested_hits, nested_stepped;
	bool inside_handshake;
	int i, found = -1;

	if (ts->epoch != probe_epoch)
		return 0;
	ts->hits++;
	/* Match by stack pointer: skipped length queries and lost returns (longjmp) cannot pop the wrong frame. */
	for (i = TLSPROF_MAX_DEPTH - 1; i >= 0; i--) {
		if (i < ts->depth && ((any_func && ts->frames[i].sp <= entry_sp) ||
				      (ts->frames[i].sp == entry_sp && ts->frames[i].func == func))) {
			found = i;
			if (!any_func)
				break;
		}
	}
	if (found < 0 || found >= TLSPROF_MAX_DEPTH)
		return 0;
	/* The frame a handshake call returns to, if it is one: only the outermost finishes a handshake. */
	inside_handshake = found > 0 && ts->frames[found - 1].stage == STAGE_HANDSHAKE;
	/* Read back from memory, the index is known to the verifier by its bounds alone: it checks the rest of
	 * this function once, not once for each index the search above can end with. */
	ts->popped = found;
	found = *(volatile __u32 *)&ts->popped;
	if (found < 0 || found >= TLSPROF_MAX_DEPTH)
		return 0;
	/* Keeps clang from indexing with a copy of found the check above did not bound. */
	barrier_var(found);
	if (any_func) {
		flags = ts->frames[found].flags;
		/* The frames inside it ended unseen (a call from a caller first seen after its function's return
		 * instructions lost their probes). */
		for (i = 0; i < TLSPROF_MAX_DEPTH; i++)
			if (i > found && i < ts->depth)
				count_stat(STAT_MISSED_RETURNS);
	}

	total = task_cpu_now(ts, now) - ts->frames[found].start_cpu_ns;
	/* Less this return's own hit. */
	nested_hits = ts->hits - 1 - ts->frames[found].hits_at_entry;
	nested_stepped = ts->stepped - ts->frames[found].stepped_at_entry;

	key.tgid = tgid;
	key.depth = found + 1;
	for (i = 0; i < TLSPROF_MAX_DEPTH; i++)
		if (i <= found)
			key.funcs[i] = ts->frames[i].func;
	val = bpf_map_lookup_elem(&tree, &key);
	if (!val) {
		struct tree_val zero = {};

		if (bpf_map_update_elem(&tree, &key, &zero, BPF_NOEXIST) && bpf_map_lookup_elem(&tree, &key) == NULL)
			count_stat(STAT_TREE_DROPS);
		val = bpf_map_lookup_elem(&tree, &key);
	}
	if (val) {
		__sync_fetch_and_add(&val->calls, 1);
		__sync_fetch_and_add(&val->cpu_ns, total);
		__sync_fetch_and_add(&val->nested_hits, nested_hits);
		__sync_fetch_and_add(&val->nested_stepped, nested_stepped);
	}

	/* A derive that took another stage (DERIVE_ABSORBED_BY) made no key-exchange secret. */
	if (ts->ssl && (flags & (FF_SIG_LEN_PTR | FF_SIG_LEN_ARG | FF_GO_SIG_STACK_ARG)))
		note_lengths(tgid, ts->ssl, flags, ts->frames[found].arg3, 0);
	if (ts->ssl && (flags & FF_SIG_RESULT))
		note_lengths(tgid, ts->ssl, flags, (flags & FF_GO_ABI) ? ctx->bx : rust_vec_result_len(PT_REGS_RC(ctx)),
			     0);
	if (ts->ssl && (flags & (FF_SECRET_LEN_PTR | FF_SECRET_LEN_RET)) && ts->frames[found].stage == STAGE_DERIVE)
		note_lengths(tgid, ts->ssl, flags, ts->frames[found].arg3, (int)PT_REGS_RC(ctx));
	if (ts->frames[found].stage == STAGE_HANDSHAKE && ts->ssl && !inside_handshake)
		finish_handshake(ok || completed_anyway(ts->ssl, ts->frames[found].func), tgid, ts, total, nested_hits,
				 nested_stepped);
	else if (ts->frames[found].drives && ts->ssl && ts->driving)
		finish_io_driver(ctx, tgid, ts, ts->frames[found].func, total, nested_hits, nested_stepped);
	ts->depth = found;
	return 0;
}

/* A stage function's return. */
static __always_inline void exit_stage(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid, tgid = pid_tgid >> 32;
	/* On return the stack pointer sits one slot above where it was at entry (the popped return address). */
	__u64 entry_sp = PT_REGS_SP(ctx) - 8;
	__u32 flags = COOKIE_FLAGS(cookie);
	struct thread_state *ts;
	bool ok;

	if (!target_hit(tgid, flags))
		return;
	count_stat(STAT_PROBE_HITS);
	if (probes_paused())
		return;
	ts = bpf_map_lookup_elem(&threads, &tid);
	if (!ts)
		return;
	/* 1 is success for SSL_do_handshake, SSL_accept, SSL_connect and the state machine alike. A step of a
	 * handshake driven message by message returns its result through memory: its completion is the last
	 * step's return without a fatal alert. */
	if (flags & FF_HS_STEP)
		ok = (flags & FF_HS_FINISH) && !ts->alerted;
	else
		ok = (int)PT_REGS_RC(ctx) == 1;
	pop_frame(ctx, ts, tgid, cookie, entry_sp, ok, bpf_ktime_get_ns());
}

SEC("uretprobe.multi")
int stage_exit(struct pt_regs *ctx)
{
	exit_stage(ctx);
	return 0;
}

/* The return of a function whose result is the connection (FF_SSL_RET): a fact about it, no frame. A program of
 * its own, so that where stage functions have session probes (below) stage_exit need not be loaded. */
SEC("uretprobe.multi")
int connection_return(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid, flags = COOKIE_FLAGS(bpf_get_attach_cookie(ctx));
	struct thread_state *ts;

	if (!target_hit(pid_tgid >> 32, flags))
		return 0;
	count_stat(STAT_PROBE_HITS);
	if (probes_paused())
		return 0;
	note_conn_fact(PT_REGS_RC(ctx), pid_tgid >> 32, FF_SSL_ARG | (flags & FF_CONN_START));
	/* A connection starts between handshake calls, never inside one. */
	ts = bpf_map_lookup_elem(&threads, &tid);
	if (ts)
		ts->settled_epoch = probe_epoch;
	return 0;
}

/* Where the kernel has them (6.13+), a stage function with both is probed by one session program: its entry
 * declines the return probe when it opened no frame (a length query, a paused window), so such a call costs
 * one hit, not two. User space leaves it unloaded elsewhere. */
extern bool bpf_session_is_return(void) __ksym __weak;

SEC("uprobe.session")
int stage_session(struct pt_regs *ctx)
{
	if (bpf_session_is_return()) {
		exit_stage(ctx);
		return 0;
	}
	return enter_stage(ctx) ? 0 : 1;
}

/* A goroutine's stack moves when it grows (copied whole to a bigger one): its frames are kept by their
 * distance from the stack's top, which the copy keeps, counted down from a base so that deeper frames still
 * sit lower. g.stack.hi is the g struct's second word in every Go release. */
#define GO_STACK_POS_BASE (1ULL << 62)

static __always_inline __u64 go_stack_pos(__u64 g, __u64 sp)
{
	__u64 hi = 0;

	if (bpf_probe_read_user(&hi, sizeof(hi), (void *)(g + 8)) || hi < sp)
		return sp;
	return GO_STACK_POS_BASE - (hi - sp);
}

/* The goroutine stops running on its thread: its clock stops. */
static __always_inline void go_stop(struct thread_state *gs, __u64 now)
{
	if (!gs->running)
		return;
	gs->cpu_ns = task_cpu_now(gs, now);
	gs->running = 0;
}

/* Goroutine g of tgid runs on thread t (tid) from now on; whichever ran there before stopped. */
static __always_inline void go_run(struct thread_state *t, __u32 tid, __u32 tgid, __u64 g, __u64 now)
{
	struct goroutine_key key = { .tgid = tgid };
	struct thread_state *gs;

	if (t->g && t->g != g) {
		key.g = t->g;
		gs = bpf_map_lookup_elem(&goroutines, &key);
		if (gs && gs->thread == tid)
			go_stop(gs, now);
	}
	t->g = g;
	key.g = g;
	gs = bpf_map_lookup_elem(&goroutines, &key);
	if (!gs || (gs->running && gs->thread == tid))
		return;
	/* Still running elsewhere: the switch away from that thread was not seen (probes attached since). */
	go_stop(gs, now);
	gs->running = 1;
	gs->thread = tid;
	gs->last_in = thread_cpu_now(t, now);
}

/* Go's scheduler switches goroutines (FF_G_RUN, FF_G_STOP, FF_G_END). */
static __always_inline void go_switch(struct pt_regs *ctx, __u32 tid, __u32 tgid, __u32 flags, __u64 now)
{
	struct goroutine_key key = { .tgid = tgid, .g = ctx->r14 };
	struct thread_state *t, *gs;

	if (flags & FF_G_RUN) {
		t = thread_state_of(tid, now);
		if (t)
			go_run(t, tid, tgid, ctx->ax, now);
		return;
	}
	t = bpf_map_lookup_elem(&threads, &tid);
	if (t && t->g == key.g)
		t->g = 0;
	gs = bpf_map_lookup_elem(&goroutines, &key);
	if (!gs)
		return;
	if (flags & FF_G_END)
		bpf_map_delete_elem(&goroutines, &key);
	else
		go_stop(gs, now);
}

/* At the entry of an FF_GO_LEARN_RETURN function (past its stack check: the stack and frame pointers as at
 * entry, the frame pointer still the caller's): reports the return address to user space the first time the
 * function is called from there, and counts the function's calls since it last did. */
static __always_inline void learn_return(struct pt_regs *ctx, __u32 tgid, __u16 func)
{
	struct go_return_key key = { .tgid = tgid, .func = func };
	struct go_calls_key calls_key = { .tgid = tgid, .func = func };
	struct go_return_event *e;
	__u64 none = 0, *calls;
	__u32 seen = 0;

	if (bpf_probe_read_user(&key.addr, sizeof(key.addr), (void *)PT_REGS_SP(ctx)))
		return;
	if (bpf_map_lookup_elem(&go_returns, &key)) {
		calls = bpf_map_lookup_elem(&go_calls, &calls_key);
		if (calls)
			__sync_fetch_and_add(calls, 1);
		return;
	}
	if (bpf_map_update_elem(&go_returns, &key, &seen, BPF_NOEXIST))
		return;
	bpf_map_update_elem(&go_calls, &calls_key, &none, BPF_ANY);
	e = bpf_ringbuf_reserve(&go_callers, sizeof(*e), 0);
	if (!e) {
		/* Reported again by the next call from there. */
		bpf_map_delete_elem(&go_returns, &key);
		return;
	}
	e->kind = EVENT_GO_RETURN;
	e->tgid = tgid;
	e->addr = key.addr;
	if (bpf_probe_read_user(&e->outer, sizeof(e->outer), (void *)(PT_REGS_FP(ctx) + 8)))
		e->outer = 0;
	e->func = func;
	e->pad[0] = e->pad[1] = e->pad[2] = 0;
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

/* Every probe on Go code: entries and exit sites of stage functions, and the scheduler's switches. Nothing
 * here changes the target's stack or registers. */
static __always_inline bool stream_hello(__u32 kind, __u32 tgid, __u64 ssl, __s32 fd, __u64 buf, __u64 len,
					 __u32 body_only, __u32 continued);

/* FF_QUIC_HELLO: Go's (*QUICConn).HandleData(level RBX, data RCX/RDI) on receiver RAX, whose first word is the
 * *Conn. */
static __always_inline void go_quic_hello(struct pt_regs *ctx, __u32 tgid)
{
	__u64 conn = 0;

	if (ctx->bx != 0 || ctx->di < QUIC_HELLO_RANDOM_END ||
	    bpf_probe_read_user(&conn, sizeof(conn), (void *)ctx->ax) || !conn)
		return;
	stream_hello(EVENT_QUIC_CONN, tgid, conn, -1, ctx->cx, QUIC_HELLO_RANDOM_END, 1, 0);
}

SEC("uprobe.multi")
int go_probe(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 flags = COOKIE_FLAGS(cookie);
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid, tgid = pid_tgid >> 32;
	struct goroutine_key key = { .tgid = tgid, .g = ctx->r14 };
	__u8 site = COOKIE_SITE(cookie);
	bool stepped = flags & FF_STEPPED, exit = site != SITE_ENTRY;
	struct thread_state *t, *gs;
	__u64 now, sp;

	count_stat(STAT_PROBE_HITS);
	if (stepped)
		count_stat(STAT_STEPPED_HITS);
	if (probes_paused())
		return 0;
	now = bpf_ktime_get_ns();
	if (flags & (FF_G_RUN | FF_G_STOP | FF_G_END)) {
		count_stat(STAT_SCHEDULER_HITS);
		go_switch(ctx, tid, tgid, flags, now);
		return 0;
	}
	if (flags & FF_QUIC_HELLO) {
		go_quic_hello(ctx, tgid);
		return 0;
	}
	if (!key.g)
		return 0;
	gs = bpf_map_lookup_elem(&goroutines, &key);
	if (!gs) {
		__u32 zero = 0;
		struct thread_state *fresh = bpf_map_lookup_elem(&thread_zero, &zero);

		if (exit || !fresh)
			return 0;
		if (bpf_map_update_elem(&goroutines, &key, fresh, BPF_NOEXIST) &&
		    bpf_map_lookup_elem(&goroutines, &key) == NULL) {
			count_stat(STAT_THREAD_DROPS);
			return 0;
		}
		gs = bpf_map_lookup_elem(&goroutines, &key);
		if (!gs)
			return 0;
		gs->goroutine = 1;
	}
	t = thread_state_of(tid, now);
	if (!t)
		return 0;
	go_run(t, tid, tgid, key.g, now);
	sp = go_stack_pos(key.g, PT_REGS_SP(ctx) - (site == SITE_RETURNED || site == SITE_LEARNED ? 8 : 0));
	if (exit) {
		/* An error result is an interface: nil when its type word (RAX) is 0 (read only for handshake
		 * functions, which are closed at SITE_RETURNED only where the caller has not moved it yet). The exit's
		 * own hit is counted by pop_frame; its single step (a return instruction's) comes after the frame
		 * closed. */
		pop_frame(ctx, gs, tgid, cookie, sp, ctx->ax == 0, now);
		gs->stepped += stepped;
		return 0;
	}
	gs->hits++;
	gs->stepped += stepped;
	/* A function that only tells the handshake it runs in a fact: no frame, no exit. */
	if (COOKIE_STAGE(cookie) == STAGE_NONE) {
		if (gs->epoch == probe_epoch)
			note_cert_ops(tgid, gs, flags);
		return 0;
	}
	if (flags & FF_GO_LEARN_RETURN)
		learn_return(ctx, tgid, COOKIE_FUNC(cookie));
	push_frame(ctx, gs, tgid, cookie, sp, ctx->ax, now);
	return 0;
}

/* Streams len (1..) bytes at buf to user space as a hello_event of `kind`; false when the ring buffer is full. */
static __always_inline bool stream_hello(__u32 kind, __u32 tgid, __u64 ssl, __s32 fd, __u64 buf, __u64 len,
					 __u32 body_only, __u32 continued)
{
	__u32 zero = 0, n = len < TLSPROF_HELLO_BYTES ? len : TLSPROF_HELLO_BYTES;
	struct hello_event *e = bpf_map_lookup_elem(&hello_scratch, &zero);
	struct target_state *t = bpf_map_lookup_elem(&targets, &tgid);

	if (!e)
		return false;
	e->target_flags = t ? t->flags : 0;
	e->kind = kind;
	e->tgid = tgid;
	e->ssl = ssl;
	e->fd = fd;
	e->body_only = body_only;
	e->continued = continued;
	/* n is 1..HELLO_BYTES: a no-op, in a form the verifier can bound. */
	n = ((n - 1) & (TLSPROF_HELLO_BYTES - 1)) + 1;
	e->len = bpf_probe_read_user(e->data, n, (void *)buf) ? 0 : n;
	if (bpf_ringbuf_output(&handshakes, e, offsetof(struct hello_event, data) + n, BPF_RB_NO_WAKEUP)) {
		count_stat(STAT_HANDSHAKE_DROPS);
		return false;
	}
	return true;
}

/* If buf holds a ClientHello, stream it (up to its own end: bytes after it, such as early data, are never
 * copied), and the rest of it from the reads that follow when this read, inside a handshake call, took only its
 * start (within the same handshake, the bytes that follow a ClientHello's start are its own). If buf holds the
 * ServerHello of the connection this thread is handshaking (or last was), stream it. Only handshake messages
 * are read past their first bytes: application data is never copied. */
static __always_inline void capture_hello(__u32 tgid, struct thread_state *ts, __s32 fd, __u64 buf, __u64 len,
					  bool reading)
{
	__u64 ssl = ts->ssl ? ts->ssl : ts->last_ssl;
	__u32 body_only, type, total;
	struct conn_state *c;
	__u8 head[6] = {};
	bool pending =
	    reading && ts->client_hello_left && fd == ts->client_hello_fd && ts->ssl && ts->ssl == ts->client_hello_ssl;

	if (len >= 6 && bpf_probe_read_user(head, sizeof(head), (void *)buf))
		return;
	/* The rest of a ClientHello, unless a new one starts here (its last part never came). */
	if (pending && !(len >= 6 && head[0] == 22 && head[1] == 3 && head[5] == 1)) {
		total = len < ts->client_hello_left ? len : ts->client_hello_left;
		ts->client_hello_left -= total;
		stream_hello(EVENT_CLIENT_HELLO, tgid, ssl, fd, buf, total, 1, 1);
		return;
	}
	if (reading && fd == ts->client_hello_fd)
		ts->client_hello_left = 0;
	if (len < 6)
		goto header;
	/* A handshake record (22) starting with a ClientHello (1) or ServerHello (2), or such a message after a
	 * separate record header. */
	if (head[0] == 22 && head[1] == 3 && (head[5] == 1 || head[5] == 2)) {
		body_only = 0;
		type = head[5];
		total = 5 + ((__u32)head[3] << 8 | head[4]);
	} else if ((head[0] == 1 || head[0] == 2) && ts->last_header_type == 22) {
		body_only = 1;
		type = head[0];
		total = 4 + ((__u32)head[1] << 16 | (__u32)head[2] << 8 | head[3]);
	} else {
		goto header;
	}
	if (type == 1) {
		if (len > total)
			len = total;
		if (stream_hello(EVENT_CLIENT_HELLO, tgid, ssl, fd, buf, len, body_only, 0) && reading && ts->ssl &&
		    len < total) {
			ts->client_hello_ssl = ts->ssl;
			ts->client_hello_fd = fd;
			ts->client_hello_left = total - len;
		}
		return;
	}
	if (!ssl)
		return;
	c = conn_lookup(tgid, ssl, false);
	if (c && !c->hello && stream_hello(EVENT_HELLO, tgid, ssl, fd, buf, len, body_only, 0))
		c->hello = 1;
	return;
header:
	if (len == 5 && bpf_probe_read_user(head, 1, (void *)buf) == 0)
		ts->last_header_type = head[0];
}

#include "wire.bpf.h"

/* The state whose connection a socket call belongs to: the thread's, or the goroutine's it runs (Go). */
static __always_inline struct thread_state *current_thread(__u32 *tgid)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	struct thread_state *ts;
	struct goroutine_key key = {};

	*tgid = pid_tgid >> 32;
	ts = bpf_map_lookup_elem(&threads, &tid);
	if (!ts || !ts->g)
		return ts;
	key.tgid = *tgid;
	key.g = ts->g;
	return bpf_map_lookup_elem(&goroutines, &key);
}

/* A run of one of tlsprof's programs (other than the probes) in target `t`'s thread, begun at `start`: its
 * run time goes to the target (target_state.own_ns). */
static __always_inline void charge_own(struct target_state *t, enum tlsprof_own kind, __u64 start)
{
	if (!t || kind >= OWN_KINDS)
		return;
	__sync_fetch_and_add(&t->own_ns[kind], bpf_ktime_get_ns() - start);
	__sync_fetch_and_add(&t->own_runs[kind], 1);
}

/* From errno.h, which vmlinux.h does not carry: a non-blocking connect under way. */
#define EINPROGRESS 115

/* Connections: attached for the whole recording. Accepting and connecting are once per connection, so
 * these cost the targets next to nothing; every process's calls run them, and return at the map lookup. */
static __always_inline int count_connection(long ret, bool connecting)
{
	__u64 start = bpf_ktime_get_ns();
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct target_state *target = bpf_map_lookup_elem(&targets, &tgid);

	if (target && (ret >= 0 || (connecting && ret == -EINPROGRESS)))
		__sync_fetch_and_add(&target->connections, 1);
	/* A new socket: whatever its fd was followed as is gone (a close the programs did not see: dup2). */
	if (target && !connecting && ret >= 0)
		wire_forget(tgid, ret);
	charge_own(target, OWN_CONNECTIONS, start);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_accept4")
int on_accept4_exit(struct trace_event_raw_sys_exit *ctx)
{
	return count_connection(ctx->ret, false);
}

SEC("tracepoint/syscalls/sys_exit_accept")
int on_accept_exit(struct trace_event_raw_sys_exit *ctx)
{
	return count_connection(ctx->ret, false);
}

SEC("tracepoint/syscalls/sys_enter_connect")
int on_connect_enter(struct trace_event_raw_sys_enter *ctx)
{
	__u64 start = bpf_ktime_get_ns();
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct target_state *target = bpf_map_lookup_elem(&targets, &tgid);

	if (target)
		wire_forget(tgid, ctx->args[0]);
	charge_own(target, OWN_CONNECTIONS, start);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_connect")
int on_connect_exit(struct trace_event_raw_sys_exit *ctx)
{
	return count_connection(ctx->ret, true);
}

/* The socket calls below are attached only while --hello-capture says: they run on every write and read of
 * every process while attached, and return at the targets lookup for all but the targets. on_write also takes
 * sendto, on_read_enter recvfrom (their first arguments are write's and read's), on_read_exit every read's
 * exit. */

/* A target's socket call: the target (NULL when the caller is none) and, through tgid and ts, the caller's
 * process and thread (or goroutine) state. */
static __always_inline struct target_state *socket_caller(__u32 *tgid, struct thread_state **ts)
{
	struct target_state *t;

	*ts = NULL;
	/* Between probe windows the socket programs may stay attached (--hello-capture always): they run with the
	 * probes only. */
	if (probes_paused())
		return NULL;
	*tgid = bpf_get_current_pid_tgid() >> 32;
	t = bpf_map_lookup_elem(&targets, tgid);
	*ts = t ? current_thread(tgid) : NULL;
	return t;
}

/* Bytes written from (or, reading, read into) an iovec array of cnt entries, `len` of them in all: followed on
 * the wire entry by entry, and the first entry's looked at for hellos by the stage probes' connection. */
static __always_inline void socket_iovecs(__u32 tgid, struct thread_state *ts, __s32 fd, __u64 iov, __u64 cnt,
					  __u64 len, bool reading)
{
	struct iovec v;
	int i;

	for (i = 0; i < WIRE_IOVECS && i < cnt && len; i++) {
		if (bpf_probe_read_user(&v, sizeof(v), (void *)(iov + i * sizeof(v))))
			return;
		if ((__u64)v.iov_len > len)
			v.iov_len = len;
		if (i == 0 && ts)
			capture_hello(tgid, ts, fd, (__u64)v.iov_base, v.iov_len, reading);
		wire_follow(tgid, fd, (__u64)v.iov_base, v.iov_len, reading);
		len -= v.iov_len;
	}
}

/* The socket calls' programs look up their caller first and read the clock only for a target: every other
 * process on the machine pays that lookup alone. A target's run is timed from there (charge_own). */

SEC("tracepoint/syscalls/sys_enter_write")
int on_write(struct trace_event_raw_sys_enter *ctx)
{
	__u32 tgid;
	struct thread_state *ts;
	struct target_state *t = socket_caller(&tgid, &ts);
	__u64 start;

	if (!t)
		return 0;
	start = bpf_ktime_get_ns();
	if (!wire_done(tgid, ctx->args[0])) {
		if (ts)
			capture_hello(tgid, ts, ctx->args[0], ctx->args[1], ctx->args[2], false);
		wire_follow(tgid, ctx->args[0], ctx->args[1], ctx->args[2], 0);
	}
	charge_own(t, OWN_CAPTURE, start);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_writev")
int on_writev(struct trace_event_raw_sys_enter *ctx)
{
	__u32 tgid;
	struct thread_state *ts;
	struct target_state *t = socket_caller(&tgid, &ts);
	__u64 start;

	if (!t)
		return 0;
	start = bpf_ktime_get_ns();
	if (!wire_done(tgid, ctx->args[0]))
		socket_iovecs(tgid, ts, ctx->args[0], ctx->args[1], ctx->args[2], ~0ULL, false);
	charge_own(t, OWN_CAPTURE, start);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_sendmsg")
int on_sendmsg(struct trace_event_raw_sys_enter *ctx)
{
	__u32 tgid;
	struct thread_state *ts;
	struct target_state *t = socket_caller(&tgid, &ts);
	struct user_msghdr msg;
	__u64 start;

	if (!t)
		return 0;
	start = bpf_ktime_get_ns();
	if (!wire_done(tgid, ctx->args[0]) && bpf_probe_read_user(&msg, sizeof(msg), (void *)ctx->args[1]) == 0)
		socket_iovecs(tgid, ts, ctx->args[0], (__u64)msg.msg_iov, msg.msg_iovlen, ~0ULL, false);
	charge_own(t, OWN_CAPTURE, start);
	return 0;
}

/* Datagrams sent or received by one sendmmsg or recvmmsg call (cnt of the struct mmsghdr array at vec; received:
 * each one's length as the call left it), each followed on the wire from its first iovec. */
static __always_inline void socket_mmsgs(__u32 tgid, __s32 fd, __u64 vec, __u64 cnt, bool received)
{
	struct mmsghdr m;
	struct iovec v;
	int i;

	for (i = 0; i < WIRE_MMSGS && i < cnt; i++) {
		if (bpf_probe_read_user(&m, sizeof(m), (void *)(vec + i * sizeof(m))) ||
		    bpf_probe_read_user(&v, sizeof(v), (void *)m.msg_hdr.msg_iov))
			return;
		if (received && (__u64)v.iov_len > m.msg_len)
			v.iov_len = m.msg_len;
		wire_follow(tgid, fd, (__u64)v.iov_base, v.iov_len, received);
	}
}

/* What a read's buffer argument is. */
enum read_buffer {
	READ_BUF = 0,
	READ_IOVECS = 1,
	/* A struct user_msghdr (recvmsg), read at entry for its iovec array. */
	READ_MSGHDR = 2,
	/* An array of struct mmsghdr (recvmmsg). */
	READ_MMSGS = 3,
};

/* A read's entry: its buffer (or iovec array of cnt entries, or message headers), kept for its exit unless its
 * socket is past its handshake. */
static __always_inline int read_entry(__s32 fd, __u64 buf, __u32 cnt, enum read_buffer kind)
{
	__u32 tgid, tid = (__u32)bpf_get_current_pid_tgid();
	struct thread_state *ts;
	struct target_state *t = socket_caller(&tgid, &ts);
	struct wire_read r = { .fd = fd, .gen = capture_gen, .epoch = probe_epoch, .mmsg = kind == READ_MMSGS };
	struct user_msghdr msg;
	__u64 start;

	if (!t)
		return 0;
	start = bpf_ktime_get_ns();
	if (wire_done(tgid, fd))
		goto out;
	r.buf = buf;
	r.iovcnt = kind == READ_BUF ? 0 : (cnt ? cnt : 1);
	if (kind == READ_MSGHDR) {
		if (bpf_probe_read_user(&msg, sizeof(msg), (void *)buf))
			goto out;
		r.buf = (__u64)msg.msg_iov;
		r.iovcnt = msg.msg_iovlen ? msg.msg_iovlen : 1;
	}
	if (ts && kind == READ_BUF) {
		ts->read_buf = buf;
		ts->read_fd = fd;
	}
	bpf_map_update_elem(&wire_reads, &tid, &r, BPF_ANY);
out:
	charge_own(t, OWN_CAPTURE, start);
	return 0;
}

/* From socket.h, which vmlinux.h does not carry: a read that leaves its bytes to be read again. */
#define MSG_PEEK 2

SEC("tracepoint/syscalls/sys_enter_read")
int on_read_enter(struct trace_event_raw_sys_enter *ctx)
{
	return read_entry(ctx->args[0], ctx->args[1], 0, READ_BUF);
}

/* recvfrom: a peek (nginx peeks at a connection's first byte) is read again by the next call. */
SEC("tracepoint/syscalls/sys_enter_recvfrom")
int on_recvfrom_enter(struct trace_event_raw_sys_enter *ctx)
{
	if (ctx->args[3] & MSG_PEEK)
		return 0;
	return read_entry(ctx->args[0], ctx->args[1], 0, READ_BUF);
}

SEC("tracepoint/syscalls/sys_enter_readv")
int on_readv_enter(struct trace_event_raw_sys_enter *ctx)
{
	return read_entry(ctx->args[0], ctx->args[1], ctx->args[2], READ_IOVECS);
}

SEC("tracepoint/syscalls/sys_enter_recvmsg")
int on_recvmsg_enter(struct trace_event_raw_sys_enter *ctx)
{
	if (ctx->args[2] & MSG_PEEK)
		return 0;
	return read_entry(ctx->args[0], ctx->args[1], 0, READ_MSGHDR);
}

/* recvmmsg: QUIC servers (quic-go, Envoy) read a batch of datagrams at once. */
SEC("tracepoint/syscalls/sys_enter_recvmmsg")
int on_recvmmsg_enter(struct trace_event_raw_sys_enter *ctx)
{
	if ((ctx->args[3] & MSG_PEEK) || !ctx->args[2])
		return 0;
	return read_entry(ctx->args[0], ctx->args[1], ctx->args[2], READ_MMSGS);
}

SEC("tracepoint/syscalls/sys_enter_sendmmsg")
int on_sendmmsg(struct trace_event_raw_sys_enter *ctx)
{
	__u32 tgid;
	struct thread_state *ts;
	struct target_state *t = socket_caller(&tgid, &ts);
	__u64 start;

	if (!t)
		return 0;
	start = bpf_ktime_get_ns();
	socket_mmsgs(tgid, ctx->args[0], ctx->args[1], ctx->args[2], false);
	charge_own(t, OWN_CAPTURE, start);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_read")
int on_read_exit(struct trace_event_raw_sys_exit *ctx)
{
	__u32 tgid, tid = (__u32)bpf_get_current_pid_tgid();
	struct thread_state *ts;
	struct target_state *t = socket_caller(&tgid, &ts);
	struct wire_read *r;
	__u64 start;

	if (!t)
		return 0;
	start = bpf_ktime_get_ns();
	if (ts && ts->read_buf) {
		if (ctx->ret > 0)
			capture_hello(tgid, ts, ts->read_fd, ts->read_buf, ctx->ret, true);
		ts->read_buf = 0;
	}
	r = bpf_map_lookup_elem(&wire_reads, &tid);
	if (r && r->gen == capture_gen && r->epoch == probe_epoch && ctx->ret > 0) {
		if (r->mmsg)
			socket_mmsgs(tgid, r->fd, r->buf, ctx->ret, true);
		else if (r->iovcnt)
			socket_iovecs(tgid, NULL, r->fd, r->buf, r->iovcnt, ctx->ret, true);
		else
			wire_follow(tgid, r->fd, r->buf, ctx->ret, 1);
	}
	if (r)
		bpf_map_delete_elem(&wire_reads, &tid);
	charge_own(t, OWN_CAPTURE, start);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_close")
int on_close(struct trace_event_raw_sys_enter *ctx)
{
	__u32 tgid;
	struct thread_state *ts;
	struct target_state *t = socket_caller(&tgid, &ts);
	__u64 start;

	if (!t)
		return 0;
	start = bpf_ktime_get_ns();
	wire_forget(tgid, ctx->args[0]);
	charge_own(t, OWN_CAPTURE, start);
	return 0;
}

/* A slice of a thread that ran a stage ends (sched_switch, prev is the current task): its task-clock time, and
 * that plus what the run queue left out during it (`left_out`), go to its process (target_state.slices_task_ns,
 * slices_ns). The scheduler has brought prev's sum_exec_runtime and the run queue's clocks up to the same
 * moment before the switch. A slice that began before the thread's state was made is not whole: skipped. */
static __always_inline void count_slice(struct thread_state *ts, struct target_state *t, __u64 left_out)
{
	__u64 task_clock = bpf_get_current_task_btf()->se.sum_exec_runtime;
	__u64 before = ts->task_clock_out;

	ts->task_clock_out = task_clock;
	if (!before || task_clock < before || !t)
		return;
	__sync_fetch_and_add(&t->slices_ns, task_clock - before + left_out);
	__sync_fetch_and_add(&t->slices_task_ns, task_clock - before);
}

SEC("tracepoint/sched/sched_switch")
int on_sched_switch(struct trace_event_raw_sched_switch *ctx)
{
	__u64 now;
	__u32 prev = ctx->prev_pid, next = ctx->next_pid, tgid;
	struct target_state *target = NULL;
	struct thread_state *ts;

	/* The clocks are needed only by stage frames, which live while the probes are attached: every switch
	 * of every thread on the machine comes here, so the rest of the time it costs next to nothing. */
	if (probes_paused())
		return 0;
	now = bpf_ktime_get_ns();
	/* prev is the current task. */
	ts = bpf_map_lookup_elem(&threads, &prev);
	if (ts) {
		tgid = bpf_get_current_pid_tgid() >> 32;
		target = bpf_map_lookup_elem(&targets, &tgid);
		if (ts->clock_epoch != probe_epoch) {
			clock_pick_up(ts, false, now);
		} else if (ts->running) {
			__u64 on_cpu = now - ts->last_in, left_out = left_out_since_in(ts, on_cpu);

			ts->cpu_ns = running_cpu(ts, on_cpu, left_out);
			ts->running = 0;
			count_slice(ts, target, left_out);
		}
	}
	ts = bpf_map_lookup_elem(&threads, &next);
	if (ts && ts->clock_epoch != probe_epoch) {
		clock_pick_up(ts, true, now);
	} else if (ts) {
		ts->last_in = now;
		ts->rq_left_out_in = rq_left_out();
		ts->running = 1;
	}
	charge_own(target, OWN_SCHEDULER, now);
	return 0;
}

/* From linux/sched.h: clone(2)'s flag for a thread of the caller's process. */
#define CLONE_THREAD 0x00010000

/* A target's new process is a target before it runs (FOLLOW_CHILDREN): a PostgreSQL backend handshakes within
 * a millisecond of its fork. Runs in the parent, on every fork and new thread on the machine. */
SEC("tracepoint/task/task_newtask")
int on_task_newtask(struct trace_event_raw_task_newtask *ctx)
{
	__u32 parent = bpf_get_current_pid_tgid() >> 32;

	if (!(follow & FOLLOW_CHILDREN) || (ctx->clone_flags & CLONE_THREAD) || !bpf_map_lookup_elem(&targets, &parent))
		return 0;
	join(ctx->pid, parent, PROCESS_FORKED, bpf_ktime_get_boot_ns());
	return 0;
}

/* A process runs a new program: a target's is looked at again by user space; one named in followed_comms
 * joins; under FOLLOW_ALL every one whose program user space has not looked at is told, for it to look for TLS
 * code in the program itself (its libraries' probes take it in when it calls them). Runs in the process, on
 * every exec on the machine. */
SEC("tracepoint/sched/sched_process_exec")
int on_process_exec(struct trace_event_raw_sched_process_exec *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 start_ns = task->group_leader->start_boottime;
	struct inode *exe = BPF_CORE_READ(task, mm, exe_file, f_inode);
	struct file_key program = {};
	char comm[16] = {};

	if (tgid == self_tgid)
		return 0;
	if (bpf_map_lookup_elem(&targets, &tgid)) {
		tell_process(tgid, 0, PROCESS_EXECED, start_ns, NULL);
		return 0;
	}
	bpf_get_current_comm(comm, sizeof(comm));
	if ((follow & FOLLOW_COMMS) && bpf_map_lookup_elem(&followed_comms, comm)) {
		join(tgid, 0, PROCESS_EXECED, start_ns);
		return 0;
	}
	if (!(follow & FOLLOW_ALL))
		return 0;
	if (exe) {
		program.ino = BPF_CORE_READ(exe, i_ino);
		program.dev = BPF_CORE_READ(exe, i_sb, s_dev);
		if (bpf_map_lookup_elem(&known_files, &program))
			return 0;
	}
	tell_process(tgid, 0, PROCESS_EXECED, start_ns, NULL);
	return 0;
}

/* From linux/mm.h. */
#define VM_EXEC 0x00000004

struct mapped_code {
	struct file_key file;
	bool exec;
};

static long code_file(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct mapped_code *m = data;
	struct inode *inode = BPF_CORE_READ(vma, vm_file, f_inode);

	m->exec = BPF_CORE_READ(vma, vm_flags) & VM_EXEC;
	if (inode) {
		m->file.ino = BPF_CORE_READ(inode, i_ino);
		m->file.dev = BPF_CORE_READ(inode, i_sb, s_dev);
	}
	return 0;
}

/* A process maps code of a file. A target's is told, for user space to unwind its stacks through it (a short
 * process may be gone before its mappings are read) and to probe its TLS code if it has some before it runs
 * (the loader maps a program's libraries before its main, dlopen a module's before its init); under
 * FOLLOW_ALL, any process's file user space has not looked at. Runs on every mmap on the machine that
 * succeeds. */
SEC("tracepoint/syscalls/sys_exit_mmap")
int on_mmap_exit(struct trace_event_raw_sys_exit *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct mapped_code m = {};
	bool target;

	/* Errors are -4095..-1. */
	if ((unsigned long)ctx->ret >= (unsigned long)-4095L || tgid == self_tgid)
		return 0;
	target = bpf_map_lookup_elem(&targets, &tgid);
	if (!target && !(follow & FOLLOW_ALL))
		return 0;
	bpf_find_vma(bpf_get_current_task_btf(), ctx->ret, code_file, &m, 0);
	if (!m.exec || !m.file.ino || (!target && bpf_map_lookup_elem(&known_files, &m.file)))
		return 0;
	tell_process(tgid, 0, PROCESS_MAPPED_CODE, bpf_get_current_task_btf()->group_leader->start_boottime, &m.file);
	return 0;
}

/* A thread of a target exits: its CPU time, which no clock of user space's can read once its process is gone. */
SEC("tracepoint/sched/sched_process_exit")
int on_process_exit(void *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct target_state *t = bpf_map_lookup_elem(&targets, &tgid);

	if (t)
		__sync_fetch_and_add(&t->exited_cpu_ns, bpf_get_current_task_btf()->se.sum_exec_runtime);
	return 0;
}

static long vma_range(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct stack_range *r = data;

	r->start = BPF_CORE_READ(vma, vm_start);
	r->end = BPF_CORE_READ(vma, vm_end);
	return 0;
}

/* Copies up to stack_bytes of user stack from sp. A read may not cross the top of the stack mapping: it
 * ends there (a failed read of tens of KiB costs the target as much as the copy, and zeroes the buffer).
 * The mapping is looked up once per thread and again only when sp leaves it: from a sample's interrupt,
 * bpf_find_vma releases the mmap lock through an irq_work, one more interrupt in the target, which costs it
 * more than the whole program (BENCHMARKS.md). Should the lookup fail (mmap lock contended), or the mapping
 * have shrunk since, retry ending one page lower. */
static __always_inline __u32 copy_user_stack(struct stack_sample *s)
{
	struct stack_range *known = bpf_map_lookup_elem(&stack_ranges, &s->tid);
	struct stack_range found = {};
	__u64 end = s->sp + stack_bytes, top = 0;
	__u32 len = stack_bytes;
	int i;

	if (known && known->start <= s->sp && s->sp < known->end) {
		top = known->end;
	} else {
		bpf_find_vma(bpf_get_current_task_btf(), s->sp, vma_range, &found, 0);
		if (found.start <= s->sp && s->sp < found.end) {
			bpf_map_update_elem(&stack_ranges, &s->tid, &found, BPF_ANY);
			top = found.end;
		}
	}
	if (top > s->sp && top < end) {
		end = top;
		len = end - s->sp;
	}

	for (i = 0; i < TLSPROF_MAX_STACK_BYTES / 4096 + 1; i++) {
		if (len == 0 || len > TLSPROF_MAX_STACK_BYTES)
			return 0;
		/* A no-op for 1..MAX, but a bound the verifier can see whatever registers clang picks. */
		len = ((len - 1) & (TLSPROF_MAX_STACK_BYTES - 1)) + 1;
		if (bpf_probe_read_user(s->stack, len, (void *)s->sp) == 0)
			return len;
		end = (end - 1) & ~4095ULL;
		if (end <= s->sp)
			return 0;
		len = end - s->sp;
	}
	return 0;
}

/* Return probes put the trampoline's address in the return slots of the calls they wait for: the kernel keeps
 * each taken address (a return_instance: its slot, the address) on the thread's list, innermost first, for as
 * long as the call runs. A sampled native frame's return address is taken from there, by its slot. */
#define TLSPROF_MAX_RETURN_INSTANCES 16

static __always_inline void return_addresses_taken(struct stack_sample *s)
{
	/* Read as plain kernel memory (bpf_probe_read_kernel), not walked as typed pointers: the verifier then
	 * checks the loop once, where typed pointers had it walk every iteration count on every path here. */
	struct return_instance *ri = BPF_CORE_READ(bpf_get_current_task_btf(), utask, return_instances);
	int i, j;

	for (j = 0; j < TLSPROF_MAX_RETURN_INSTANCES && ri; j++) {
		__u64 slot = BPF_CORE_READ(ri, stack), addr = BPF_CORE_READ(ri, orig_ret_vaddr);

		for (i = 0; i < TLSPROF_MAX_DEPTH; i++)
			if (i < s->depth && !s->ret_addrs[i] && s->ret_slots[i] == slot)
				s->ret_addrs[i] = addr;
		ri = BPF_CORE_READ(ri, next);
	}
}

/* A CPU sample of target tgid's thread tid: its user stack and the stage frames it is in, to user space. */
static __always_inline void cpu_sample(struct bpf_perf_event_data *ctx, __u32 tgid, __u32 tid)
{
	struct thread_state *ts;
	struct stack_sample *s;
	struct pt_regs *regs;
	__u64 sp, stack_hi = 0;
	__u32 cpu = bpf_get_smp_processor_id(), len;
	long n;
	int i;

	count_stat(STAT_SAMPLES);
	s = bpf_map_lookup_elem(&sample_scratch, &cpu);
	if (!s)
		return;
	s->tgid = tgid;
	s->tid = tid;
	/* x86-64 kernel addresses have the top bit set; user ones never do. */
	s->in_kernel = (__s64)ctx->regs.ip < 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	s->ip = BPF_CORE_READ(regs, ip);
	s->sp = BPF_CORE_READ(regs, sp);
	s->bp = BPF_CORE_READ(regs, bp);
	sp = s->sp;
	s->depth = 0;
	for (i = 0; i < TLSPROF_MAX_DEPTH; i++) {
		s->funcs[i] = 0;
		s->ret_slots[i] = 0;
		s->ret_addrs[i] = 0;
		s->entry_ips[i] = 0;
		s->entry_bps[i] = 0;
	}
	ts = bpf_map_lookup_elem(&threads, &tid);
	/* A Go thread: the frames are those of the goroutine it runs, and their slots positions in its stack. */
	if (ts && ts->g) {
		struct goroutine_key key = { .tgid = tgid, .g = ts->g };

		if (bpf_probe_read_user(&stack_hi, sizeof(stack_hi), (void *)(ts->g + 8)))
			stack_hi = 0;
		ts = bpf_map_lookup_elem(&goroutines, &key);
		sp = go_stack_pos(key.g, s->sp);
	}
	/* Frames of another window are stale. */
	if (ts && ts->epoch == probe_epoch) {
		for (i = 0; i < TLSPROF_MAX_DEPTH; i++) {
			/* Frames whose return slot is below the stack pointer have returned unseen. */
			if (i >= ts->depth || ts->frames[i].sp < sp)
				break;
			s->funcs[i] = ts->frames[i].func;
			s->ret_slots[i] =
			    ts->goroutine ? stack_hi - (GO_STACK_POS_BASE - ts->frames[i].sp) : ts->frames[i].sp;
			s->ret_addrs[i] = ts->frames[i].ret_addr;
			s->entry_ips[i] = ts->frames[i].entry_ip;
			s->entry_bps[i] = ts->frames[i].entry_bp;
			s->depth = i + 1;
		}
		if (!ts->goroutine)
			return_addresses_taken(s);
	}

	/* Always: a sample in the kernel's uprobe code measures what the probes cost the target
	 * (record/stacks/samples.rs), whether or not --kernel keeps kernel frames in the profile. */
	s->kernel_frames = 0;
	if (s->in_kernel) {
		n = bpf_get_stack(ctx, s->kernel_ips, sizeof(s->kernel_ips), 0);
		s->kernel_frames = n > 0 ? n / sizeof(__u64) : 0;
	}
	if (call_graph == CALL_GRAPH_FP) {
		n = bpf_get_stack(ctx, s->stack, TLSPROF_MAX_STACK_BYTES, BPF_F_USER_STACK);
		len = n > 0 ? n : 0;
	} else {
		len = copy_user_stack(s);
	}
	if (len > TLSPROF_MAX_STACK_BYTES)
		len = 0;
	s->stack_len = len;
	/* 0..MAX, in a form the verifier can bound (see copy_user_stack). */
	len = len ? ((len - 1) & (TLSPROF_MAX_STACK_BYTES - 1)) + 1 : 0;
	if (bpf_ringbuf_output(&stacks, s, offsetof(struct stack_sample, stack) + len, BPF_RB_NO_WAKEUP))
		count_stat(STAT_SAMPLE_DROPS);
}

SEC("perf_event")
int on_cpu_sample(struct bpf_perf_event_data *ctx)
{
	__u64 start = bpf_ktime_get_ns(), pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	struct target_state *t = bpf_map_lookup_elem(&targets, &tgid);

	if (!t)
		return 0;
	cpu_sample(ctx, tgid, (__u32)pid_tgid);
	charge_own(t, OWN_SAMPLER, start);
	return 0;
}

/* x86-64's system calls of the uprobe trampolines: a return probe's (Linux 6.11+) and an optimized probe's. */
#define NR_URETPROBE 335
#define NR_UPROBE 336

/* Whether the current task, in the kernel, may be there for a uprobe: it entered by an exception without an
 * error code (the breakpoint's, a single step's; also a system interrupt's) or a trampoline's system call, as
 * the entry's saved user registers say. Not by another system call, a page fault or a device interrupt: most of
 * a server's kernel time, whose stacks need not be walked. */
static __always_inline bool may_be_in_probe_trap(void)
{
	struct pt_regs *user = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	long entry = (long)BPF_CORE_READ(user, orig_ax);

	return entry == -1 || entry == NR_URETPROBE || entry == NR_UPROBE;
}

/* A denser sampler than on_cpu_sample, enabled only while the stage probes are attached: the share of the
 * targets' samples taken in the probes' traps is what the probes cost them, measured in them (the governor
 * spends --max-overhead by it). No user stack: a sample costs a target little more than its interrupt. */
SEC("perf_event")
int on_trap_sample(struct bpf_perf_event_data *ctx)
{
	__u64 start = bpf_ktime_get_ns();
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct target_state *target = bpf_map_lookup_elem(&targets, &tgid);
	struct trap_sample *t;
	long n;

	if (!target)
		return 0;
	count_stat(STAT_TRAP_SAMPLES);
	/* x86-64 kernel addresses have the top bit set; user ones never do. */
	if ((__s64)ctx->regs.ip < 0 && may_be_in_probe_trap()) {
		t = bpf_ringbuf_reserve(&trap_samples, sizeof(*t), 0);
		if (t) {
			n = bpf_get_stack(ctx, t->kernel_ips, sizeof(t->kernel_ips), 0);
			t->frames = n > 0 ? n / sizeof(__u64) : 0;
			t->pad = 0;
			bpf_ringbuf_submit(t, BPF_RB_NO_WAKEUP);
		} else {
			count_stat(STAT_TRAP_SAMPLE_DROPS);
		}
	}
	charge_own(target, OWN_SAMPLER, start);
	return 0;
}
