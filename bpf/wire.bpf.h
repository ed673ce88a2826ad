/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/* Handshakes followed on the wire: each target socket's TLS records framed from its ClientHello to the client's
 * first encrypted record, whatever library (or none tlsprof can probe) made them. Only record headers and the
 * two hellos are read: application data never is. Included by tlsprof.bpf.c (the socket programs). */
#ifndef TLSPROF_WIRE_BPF_H
#define TLSPROF_WIRE_BPF_H

enum wire_state {
	/* Not TLS over TCP: each datagram is looked at for QUIC's long-header packets. */
	WIRE_IDLE = 0,
	/* A handshake record's header crossed alone as the socket's first bytes: a ClientHello if its body starts
	 * with one. */
	WIRE_HEADER = 1,
	/* Its ClientHello crossed: its ServerHello is awaited (after a HelloRetryRequest too). */
	WIRE_CLIENT_HELLO = 2,
	/* Its ServerHello crossed: the client's first encrypted record is awaited. */
	WIRE_SERVER_HELLO = 3,
	/* Past its handshake: nothing more to look at until the socket is reused. */
	WIRE_DONE = 4,
};

struct wire_conn {
	__u64 id;
	/* When its ClientHello and its ServerHello crossed (CLOCK_MONOTONIC, ns). */
	__u64 client_hello_ns;
	__u64 server_hello_ns;
	/* The probe epoch it was seen in from its start: one from an earlier window was seen in part. */
	__u32 epoch;
	/* Bytes of the client-to-server record under way still to come, and of the ClientHello still to stream. */
	__u32 c2s_left;
	__u32 hello_left;
	__u8 state;
	/* FF_ROLE_SERVER: the target reads the client's records. */
	__u8 role;
	/* The client's ChangeCipherSpec crossed: TLS 1.2's encrypted Finished follows as a handshake record. */
	__u8 c2s_ccs;
	/* The server-to-client direction's last call carried a handshake record's header alone. */
	__u8 s2c_header;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct wire_key);
	__type(value, struct wire_conn);
} wire_conns SEC(".maps");

/* A target thread's read under way (its buffer, or iovec array, is known at entry, its length at exit). */
struct wire_read {
	__u64 buf;
	__s32 fd;
	/* 0: buf is the buffer; else buf is an iovec array of this many entries. */
	__u32 iovcnt;
	/* capture_gen and probe_epoch at entry: a read whose exit came while the programs were detached, or in
	 * another window, is stale. */
	__u32 gen;
	__u32 epoch;
	/* 1: buf is an array of iovcnt struct mmsghdr (recvmmsg). */
	__u32 mmsg;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct wire_read);
} wire_reads SEC(".maps");

/* Set by user space each time the socket programs attach. */
volatile __u32 capture_gen = 0;

/* Connection numbers: a socket's fd is reused, its number is not. */
__u64 wire_next_id = 0;

/* Records framed per socket call at most; a call that carries more is given up (STAT_WIRE_LOST). */
#define WIRE_RECORDS_PER_CALL 8
/* iovec entries looked at per call. */
#define WIRE_IOVECS 4
/* Datagrams looked at per recvmmsg or sendmmsg call. */
#define WIRE_MMSGS 8

/* QUIC versions whose Initial packets user space opens: 1 (RFC 9000) and 2 (RFC 9369). */
#define QUIC_V1 0x00000001
#define QUIC_V2 0x6b3343cf
/* Bytes streamed of a datagram that begins with a Handshake packet: its header is all that is read. */
#define QUIC_HANDSHAKE_HEAD 64

/* RFC 8446 4.1.3: a HelloRetryRequest is a ServerHello with this random (its first 8 bytes, CF 21 AD 74 E5 9A
 * 61 11, read as a little-endian u64). */
#define HRR_RANDOM_HEAD 0x11619ae574ad21cfULL

static __always_inline void wire_end(__u32 tgid, struct wire_conn *c, __s32 fd, __u16 outcome)
{
	struct target_state *t = bpf_map_lookup_elem(&targets, &tgid);
	struct wire_event e = {
		.kind = EVENT_WIRE_END,
		.tgid = tgid,
		.conn = c->id,
		.role = c->role,
		.outcome = outcome,
		.target_flags = t ? t->flags : 0,
		.fd = fd,
		.hello_to_end_ns =
		    bpf_ktime_get_ns() - (outcome == OUTCOME_ABANDONED ? c->server_hello_ns : c->client_hello_ns),
	};

	c->state = WIRE_DONE;
	if (bpf_ringbuf_output(&handshakes, &e, sizeof(e), BPF_RB_NO_WAKEUP))
		count_stat(STAT_WIRE_LOST);
}

/* A target's socket whose connection the wire followed past its handshake in this window: its calls need no
 * look (keep-alive traffic costs a lookup a call). */
static __always_inline bool wire_done(__u32 tgid, __s32 fd)
{
	struct wire_key key = { .tgid = tgid, .fd = fd };
	struct wire_conn *c = bpf_map_lookup_elem(&wire_conns, &key);

	return c && c->epoch == probe_epoch && c->state == WIRE_DONE;
}

/* The socket is closed or reused: a handshake past its ServerHello ends abandoned. */
static __always_inline void wire_forget(__u32 tgid, __s32 fd)
{
	struct wire_key key = { .tgid = tgid, .fd = fd };
	struct wire_conn *c = bpf_map_lookup_elem(&wire_conns, &key);

	if (!c)
		return;
	if (c->state == WIRE_SERVER_HELLO && c->epoch == probe_epoch)
		wire_end(tgid, c, fd, OUTCOME_ABANDONED);
	bpf_map_delete_elem(&wire_conns, &key);
}

/* Client-to-server bytes at buf (len, 1..) of a followed connection: the rest of its ClientHello streamed, its
 * records framed, its end found. */
static __always_inline void wire_client_bytes(__u32 tgid, struct wire_conn *c, __s32 fd, __u64 buf, __u32 len)
{
	__u32 pos = c->c2s_left, n;
	__u8 head[5];
	int i;

	if (c->hello_left) {
		n = len < c->hello_left ? len : c->hello_left;
		c->hello_left -= n;
		if (!stream_hello(EVENT_WIRE_CLIENT_HELLO, tgid, c->id, fd, buf, n, 1, 1))
			c->hello_left = 0;
	}
	if (pos >= len) {
		c->c2s_left = pos - len;
		return;
	}
	for (i = 0; i < WIRE_RECORDS_PER_CALL; i++) {
		if (pos + 5 > len || bpf_probe_read_user(head, sizeof(head), (void *)(buf + pos))) {
			count_stat(STAT_WIRE_LOST);
			c->state = WIRE_DONE;
			return;
		}
		if (c->state == WIRE_SERVER_HELLO && (head[0] == 23 || (head[0] == 22 && c->c2s_ccs))) {
			wire_end(tgid, c, fd, OUTCOME_COMPLETED);
			return;
		}
		if (head[0] == 20)
			c->c2s_ccs = 1;
		pos += 5 + ((__u32)head[3] << 8 | head[4]);
		if (pos >= len) {
			c->c2s_left = pos - len;
			return;
		}
	}
	count_stat(STAT_WIRE_LOST);
	c->state = WIRE_DONE;
}

/* Server-to-client bytes of a connection whose ClientHello crossed: its ServerHello, at their start. */
static __always_inline void wire_server_bytes(__u32 tgid, struct wire_conn *c, __s32 fd, __u64 buf, __u32 len)
{
	__u8 head[6] = {};
	__u64 random = 0;
	__u32 body_only;

	if (len < 6 || bpf_probe_read_user(head, sizeof(head), (void *)buf)) {
		if (len == 5 && bpf_probe_read_user(head, 5, (void *)buf) == 0)
			c->s2c_header = head[0] == 22;
		return;
	}
	if (head[0] == 22 && head[1] == 3 && head[5] == 2)
		body_only = 0;
	else if (head[0] == 2 && c->s2c_header)
		body_only = 1;
	else
		return;
	c->s2c_header = 0;
	/* The random follows the message header (4 bytes) and legacy_version (2). */
	if (bpf_probe_read_user(&random, sizeof(random), (void *)(buf + (body_only ? 6 : 11))) == 0 &&
	    random == HRR_RANDOM_HEAD)
		return;
	if (!stream_hello(EVENT_WIRE_SERVER_HELLO, tgid, c->id, fd, buf, len, body_only, 0)) {
		c->state = WIRE_DONE;
		count_stat(STAT_WIRE_LOST);
		return;
	}
	c->state = WIRE_SERVER_HELLO;
	c->server_hello_ns = bpf_ktime_get_ns();
	c->c2s_ccs = 0;
}

/* A socket's first bytes in this epoch: a ClientHello begins a followed connection (role: who read it), a
 * handshake record's header alone may; anything else leaves the socket idle. Returns the bytes of the
 * ClientHello still to stream from later calls when one began. */
static __always_inline __u32 wire_start(__u32 tgid, struct wire_key *key, __u64 buf, __u32 len, bool reading)
{
	struct wire_conn fresh = { .epoch = probe_epoch, .role = reading ? FF_ROLE_SERVER : FF_ROLE_CLIENT };
	__u8 head[6] = {};
	__u32 total, part = 0;

	/* Too short to tell: the next call's bytes will. */
	if (len < 5)
		return 0;
	if (bpf_probe_read_user(head, len >= 6 ? 6 : 5, (void *)buf) == 0 && head[0] == 22 && head[1] == 3) {
		total = 5 + ((__u32)head[3] << 8 | head[4]);
		if (len == 5) {
			fresh.state = WIRE_HEADER;
			fresh.c2s_left = total - 5;
		} else if (head[5] == 1) {
			fresh.id = __sync_fetch_and_add(&wire_next_id, 1) + 1;
			fresh.client_hello_ns = bpf_ktime_get_ns();
			part = len < total ? len : total;
			if (stream_hello(EVENT_WIRE_CLIENT_HELLO, tgid, fresh.id, key->fd, buf, part, 0, 0))
				fresh.state = WIRE_CLIENT_HELLO;
		} else {
			fresh.state = WIRE_DONE;
		}
	} else if (bpf_probe_read_user(head, 3, (void *)buf) == 0 && head[0] >= 20 && head[0] <= 23 && head[1] == 3) {
		/* A TLS connection met past its start (opened before the window): no handshake of its to follow. */
		fresh.state = WIRE_DONE;
	}
	bpf_map_update_elem(&wire_conns, key, &fresh, BPF_ANY);
	return fresh.state == WIRE_CLIENT_HELLO ? total - part : 0;
}

/* A datagram a target received (inbound) or sent: one that begins with a QUIC Initial packet is streamed whole
 * (up to TLSPROF_HELLO_BYTES), one that begins with a Handshake packet its header alone. Returns 1 when the
 * datagram is QUIC's long-header traffic (0-RTT and Retry packets included, not streamed). */
__noinline int quic_datagram(__u32 tgid, __s32 fd, __u64 buf, __u32 len, __u32 inbound)
{
	__u8 head[5];
	__u32 version, type, initial, handshake;

	if (len < 7 || bpf_probe_read_user(head, sizeof(head), (void *)buf) || (head[0] & 0xc0) != 0xc0)
		return 0;
	version = (__u32)head[1] << 24 | (__u32)head[2] << 16 | (__u32)head[3] << 8 | head[4];
	type = (head[0] >> 4) & 3;
	if (version == QUIC_V1) {
		initial = type == 0;
		handshake = type == 2;
	} else if (version == QUIC_V2) {
		initial = type == 1;
		handshake = type == 3;
	} else {
		return 0;
	}
	if (initial || handshake) {
		if (handshake && len > QUIC_HANDSHAKE_HEAD)
			len = QUIC_HANDSHAKE_HEAD;
		if (!stream_hello(EVENT_QUIC_DATAGRAM, tgid, inbound, fd, buf, len, 0, 0))
			count_stat(STAT_WIRE_LOST);
	}
	return 1;
}

/* Bytes a target read from (reading) or wrote to fd: the wire's view of its handshakes. */
__noinline int wire_follow(__u32 tgid, __s32 fd, __u64 buf, __u64 len, __u32 reading)
{
	struct wire_key key = { .tgid = tgid, .fd = fd };
	struct wire_conn *c, idle = { .epoch = probe_epoch };
	__u8 first = 0;
	__u32 body, part, n = len > 0xffffff ? 0xffffff : len;

	if (!n || probes_paused())
		return 0;
	c = bpf_map_lookup_elem(&wire_conns, &key);
	if (!c || c->epoch != probe_epoch) {
		/* A UDP socket's datagrams are each looked at on their own. */
		if (quic_datagram(tgid, fd, buf, n, reading)) {
			bpf_map_update_elem(&wire_conns, &key, &idle, BPF_ANY);
			return 0;
		}
		/* The ClientHello's record is framed from its start (bytes after it in this call, such as early data,
		 * included); the rest of it, in later calls, streamed. */
		part = wire_start(tgid, &key, buf, n, reading);
		c = bpf_map_lookup_elem(&wire_conns, &key);
		if (c && c->state == WIRE_CLIENT_HELLO) {
			c->c2s_left = 0;
			wire_client_bytes(tgid, c, fd, buf, n);
			if (c->state == WIRE_CLIENT_HELLO)
				c->hello_left = part;
		}
		return 0;
	}
	if (c->state == WIRE_IDLE) {
		quic_datagram(tgid, fd, buf, n, reading);
		return 0;
	}
	if (c->state == WIRE_DONE)
		return 0;
	if (c->state == WIRE_HEADER) {
		/* The body of the record whose header came alone: a ClientHello, streamed whole or in part. */
		if (bpf_probe_read_user(&first, 1, (void *)buf) || first != 1) {
			c->state = WIRE_DONE;
			return 0;
		}
		body = c->c2s_left;
		part = n < body ? n : body;
		c->id = __sync_fetch_and_add(&wire_next_id, 1) + 1;
		c->client_hello_ns = bpf_ktime_get_ns();
		c->state = WIRE_CLIENT_HELLO;
		c->hello_left = 0;
		if (!stream_hello(EVENT_WIRE_CLIENT_HELLO, tgid, c->id, fd, buf, part, 1, 0)) {
			c->state = WIRE_DONE;
			return 0;
		}
		wire_client_bytes(tgid, c, fd, buf, n);
		if (c->state == WIRE_CLIENT_HELLO)
			c->hello_left = body - part;
		return 0;
	}
	if ((c->role == FF_ROLE_SERVER) == (reading != 0))
		wire_client_bytes(tgid, c, fd, buf, n);
	else if (c->state == WIRE_CLIENT_HELLO)
		wire_server_bytes(tgid, c, fd, buf, n);
	return 0;
}

#endif
