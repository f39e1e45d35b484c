/* probe: a minimal, independent LSP client over pipes, to check convo-bench's ratios.
 * It shares no code with the project: libc only, one request at a time written by hand.
 *
 *   probe [--mode seq|pipe|both|history] [--write one|split] [--read block|spin]
 *         [-n N] [--warmup N] [--pipe-n N] [--window W] [--quiet] -- CMD ARGS...
 *
 * seq:  N sequential session/add_user round trips (after a warm-up); p50/p90/p99/mean.
 * pipe: N requests with W in flight, one session; requests/s.
 * history: a session of 10,000 user messages of 1,024 bytes (appended W in flight),
 *       then session/history of it whole 7 times; the median's time and MB/s of reply.
 * --write one:   header and body in one write(2); split: header, then body (as many
 *                LSP libraries do).
 * --read spin:   busy-poll a non-blocking pipe instead of sleeping in read(2), to see
 *                what the wake-up of the client costs.
 * --pair B:      seq and pipe against two servers at once (`-- CMD_A ... --vs CMD_B ...`),
 *                both started before either is measured, the counts cut into B blocks that
 *                alternate between them (A B, then B A, ...): each pair of blocks runs a
 *                fraction of a second apart, so a machine whose speed drifts (other
 *                guests on the host) moves both alike. Gives the median and the spread of
 *                the B per-block ratios B/A, beside each server's median p50 and rate.
 * One JSON line per measurement on stdout.
 *
 * Build: cc -O2 -o target/probe bench/probe/probe.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int to_child = -1, from_child = -1;
static int split_writes = 0, spin_reads = 0;

/* The read side: one buffer, frames parsed in place; grown for a long reply. */
static char *rbuf;
static size_t rcap = 1 << 20, rstart = 0, rend = 0;

static void die(const char *why) {
    fprintf(stderr, "probe: %s\n", why);
    exit(1);
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void write_all(const char *p, size_t n) {
    while (n > 0) {
        ssize_t k = write(to_child, p, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            die("write to the server failed");
        }
        p += k;
        n -= (size_t)k;
    }
}

/* What a server's client keeps: its pipes and its read buffer. `--pair` keeps two and
 * swaps one into the globals above before each block. */
struct server {
    int to, from;
    pid_t pid;
    char *buf;
    size_t cap, start, end;
};

static void save(struct server *s) {
    s->to = to_child, s->from = from_child, s->buf = rbuf, s->cap = rcap, s->start = rstart, s->end = rend;
}

static void load(const struct server *s) {
    to_child = s->to, from_child = s->from, rbuf = s->buf, rcap = s->cap, rstart = s->start, rend = s->end;
}

/* One request: its header and body, in one write or two. */
static void send_body(const char *body, size_t len) {
    char frame[4096];
    int h = snprintf(frame, sizeof frame, "Content-Length: %zu\r\n\r\n", len);
    if (split_writes) {
        write_all(frame, (size_t)h);
        write_all(body, len);
    } else {
        if ((size_t)h + len > sizeof frame) die("request too large");
        memcpy(frame + h, body, len);
        write_all(frame, (size_t)h + len);
    }
}

/* Reads more bytes into rbuf; blocks (or spins) until some arrive. */
static void fill(void) {
    if (rstart == rend) rstart = rend = 0;
    if (rend == rcap) { /* compact: keep the partial frame */
        memmove(rbuf, rbuf + rstart, rend - rstart);
        rend -= rstart;
        rstart = 0;
    }
    for (;;) {
        ssize_t k = read(from_child, rbuf + rend, rcap - rend);
        if (k > 0) { rend += (size_t)k; return; }
        if (k == 0) die("the server closed its output");
        if (errno == EINTR || errno == EAGAIN) continue; /* EAGAIN: spinning */
        die("read from the server failed");
    }
}

/* The next complete frame in rbuf without reading, or NULL; its body in body and len. */
static int next_frame(const char **body, size_t *len) {
    char *head = rbuf + rstart;
    size_t avail = rend - rstart;
    char *end = memmem(head, avail, "\r\n\r\n", 4);
    if (!end) return 0;
    char *cl = memmem(head, (size_t)(end - head), "Content-Length:", 15);
    if (!cl) die("a reply without Content-Length");
    size_t n = strtoul(cl + 15, NULL, 10);
    size_t hdr = (size_t)(end + 4 - head);
    if (avail < hdr + n) {
        if (hdr + n > rcap) { /* room for the whole frame: a history is megabytes */
            memmove(rbuf, head, avail);
            rstart = 0;
            rend = avail;
            rcap = hdr + n;
            if (!(rbuf = realloc(rbuf, rcap))) die("out of memory");
        }
        return 0;
    }
    *body = head + hdr;
    *len = n;
    rstart += hdr + n;
    return 1;
}

/* A reply (a frame with an "id"); notifications are skipped. */
static int is_reply(const char *body, size_t len) {
    return memmem(body, len, "\"id\"", 4) != NULL;
}

/* Blocks until the next reply; checks it is a success when `check` names the call.
 * Returns the length of its body. */
static size_t recv_reply(const char *check) {
    const char *body;
    size_t len;
    for (;;) {
        while (next_frame(&body, &len)) {
            if (!is_reply(body, len)) continue;
            if (check && !memmem(body, len, "\"result\"", 8)) {
                fprintf(stderr, "probe: %s did not succeed: %.*s\n", check, len > 400 ? 400 : (int)len, body);
                exit(1);
            }
            return len;
        }
        fill();
    }
}

static int add_user(char *out, size_t cap, long id) {
    return snprintf(out, cap,
                    "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"session/add_user\",\"params\":"
                    "{\"session_id\":\"probe\",\"text\":\"hello there, this is a short user message\"}}",
                    id);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static long next_id = 1;

/* n round trips after `warmup` more, their latencies sorted into lat. */
static void seq_into(uint64_t *lat, long n, long warmup) {
    char body[512];
    for (long i = 0; i < warmup + n; i++) {
        int len = add_user(body, sizeof body, next_id++);
        uint64_t t0 = now_ns();
        send_body(body, (size_t)len);
        /* The very first add_user must succeed, or every figure is of an error path. */
        recv_reply(i == 0 ? "session/add_user" : NULL);
        uint64_t t1 = now_ns();
        if (i >= warmup) lat[i - warmup] = t1 - t0;
    }
    qsort(lat, (size_t)n, sizeof *lat, cmp_u64);
}

static void seq(long n, long warmup, const char *wmode, const char *rmode) {
    uint64_t *lat = malloc(sizeof *lat * (size_t)n);
    if (!lat) die("out of memory");
    seq_into(lat, n, warmup);
    double sum = 0;
    for (long i = 0; i < n; i++) sum += (double)lat[i];
    printf("{\"mode\":\"seq\",\"write\":\"%s\",\"read\":\"%s\",\"n\":%ld,\"p50_us\":%.2f,\"p90_us\":%.2f,"
           "\"p99_us\":%.2f,\"mean_us\":%.2f}\n",
           wmode, rmode, n, lat[n / 2] / 1e3, lat[n * 90 / 100] / 1e3, lat[n * 99 / 100] / 1e3, sum / n / 1e3);
    fflush(stdout);
    free(lat);
}

/* n requests, `window` in flight: requests a second. */
static double pipe_per_s(long n, long window) {
    char body[512];
    long sent = 0, received = 0;
    uint64_t t0 = now_ns();
    while (received < n) {
        while (sent < n && sent - received < window) {
            int len = add_user(body, sizeof body, next_id++);
            send_body(body, (size_t)len);
            sent++;
        }
        /* Count every complete reply already read, then read once more. */
        const char *b;
        size_t len;
        int any = 0;
        while (next_frame(&b, &len))
            if (is_reply(b, len)) { received++; any = 1; }
        if (!any && received < n) fill();
    }
    return n / ((now_ns() - t0) / 1e9);
}

static void pipe_rate(long n, long window, const char *wmode, const char *rmode) {
    double rate = pipe_per_s(n, window);
    printf("{\"mode\":\"pipe\",\"write\":\"%s\",\"read\":\"%s\",\"n\":%ld,\"window\":%ld,\"req_per_s\":%.0f}\n",
           wmode, rmode, n, window, rate);
    fflush(stdout);
}

/* History: what a host reading back a long session waits for. The session is built
 * with the requests pipelined (W in flight), then read whole; only the reads are timed. */
static void history(long window) {
    enum { MESSAGES = 10000, SIZE = 1024, READS = 7 };
    char body[SIZE + 256], text[SIZE + 1];
    memset(text, 'x', SIZE);
    text[SIZE] = 0;
    int len = snprintf(body, sizeof body,
                       "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"session/create\",\"params\":{\"session_id\":\"hist\"}}",
                       next_id++);
    send_body(body, (size_t)len);
    recv_reply("session/create");
    long sent = 0, received = 0;
    while (received < MESSAGES) {
        while (sent < MESSAGES && sent - received < window) {
            len = snprintf(body, sizeof body,
                           "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"session/add_user\",\"params\":"
                           "{\"session_id\":\"hist\",\"text\":\"%s\"}}",
                           next_id++, text);
            send_body(body, (size_t)len);
            sent++;
        }
        recv_reply(received == 0 ? "session/add_user" : NULL);
        received++;
    }
    uint64_t took[READS];
    size_t bytes = 0;
    for (int r = 0; r < READS; r++) {
        len = snprintf(body, sizeof body,
                       "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"session/history\",\"params\":{\"session_id\":\"hist\"}}",
                       next_id++);
        uint64_t t0 = now_ns();
        send_body(body, (size_t)len);
        bytes = recv_reply("session/history");
        took[r] = now_ns() - t0;
        /* Every message must be there, or the figure is of a shorter reply. */
        if (bytes < (size_t)MESSAGES * SIZE) die("session/history returned less than the session holds");
    }
    qsort(took, READS, sizeof *took, cmp_u64);
    double ms = took[READS / 2] / 1e6;
    printf("{\"mode\":\"history\",\"messages\":%d,\"bytes\":%zu,\"ms\":%.3f,\"min_ms\":%.3f,\"mb_per_s\":%.1f}\n",
           MESSAGES, bytes, ms, took[0] / 1e6, bytes / 1e6 / (ms / 1e3));
    fflush(stdout);
}

static double median(double *v, int n) {
    for (int i = 1; i < n; i++) /* insertion sort: a few dozen values */
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j]; v[j] = v[j - 1]; v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* --pair: servers[0] (A, the echo) and servers[1] (B, convo), blocks alternating. */
static void pair(struct server *servers, int blocks, long n, long warmup, long pipe_n, long window,
                 const char *wmode, const char *rmode) {
    long block_n = n / blocks, block_pipe = pipe_n / blocks;
    if (block_n < 1 || block_pipe < 1) die("--pair: fewer requests than blocks");
    uint64_t *lat = malloc(sizeof *lat * (size_t)(block_n > warmup ? block_n : warmup));
    double *p50[2], *rate[2], *seq_ratio = malloc(sizeof(double) * blocks), *pipe_ratio = malloc(sizeof(double) * blocks);
    for (int s = 0; s < 2; s++) {
        p50[s] = malloc(sizeof(double) * blocks);
        rate[s] = malloc(sizeof(double) * blocks);
        if (!p50[s] || !rate[s]) die("out of memory");
    }
    if (!lat || !seq_ratio || !pipe_ratio) die("out of memory");
    for (int s = 0; s < 2; s++) { /* each warmed up before either is measured */
        load(&servers[s]);
        seq_into(lat, warmup, 0);
        save(&servers[s]);
    }
    for (int b = 0; b < blocks; b++) {
        for (int k = 0; k < 2; k++) {
            int s = b % 2 ? 1 - k : k; /* A B, then B A: neither always goes first */
            load(&servers[s]);
            seq_into(lat, block_n, 0);
            p50[s][b] = lat[block_n / 2] / 1e3;
            save(&servers[s]);
        }
        for (int k = 0; k < 2; k++) {
            int s = b % 2 ? 1 - k : k;
            load(&servers[s]);
            rate[s][b] = pipe_per_s(block_pipe, window);
            save(&servers[s]);
        }
        seq_ratio[b] = p50[1][b] / p50[0][b];
        pipe_ratio[b] = rate[1][b] / rate[0][b];
    }
    double seq_lo = seq_ratio[0], seq_hi = seq_ratio[0], pipe_lo = pipe_ratio[0], pipe_hi = pipe_ratio[0];
    for (int b = 1; b < blocks; b++) {
        if (seq_ratio[b] < seq_lo) seq_lo = seq_ratio[b];
        if (seq_ratio[b] > seq_hi) seq_hi = seq_ratio[b];
        if (pipe_ratio[b] < pipe_lo) pipe_lo = pipe_ratio[b];
        if (pipe_ratio[b] > pipe_hi) pipe_hi = pipe_ratio[b];
    }
    printf("{\"mode\":\"pair\",\"write\":\"%s\",\"read\":\"%s\",\"blocks\":%d,\"n\":%ld,\"pipe_n\":%ld,\"window\":%ld,"
           "\"a_seq_p50_us\":%.2f,\"b_seq_p50_us\":%.2f,\"seq_ratio\":%.3f,\"seq_ratio_min\":%.3f,\"seq_ratio_max\":%.3f,"
           "\"a_pipe_per_s\":%.0f,\"b_pipe_per_s\":%.0f,\"pipe_ratio\":%.3f,\"pipe_ratio_min\":%.3f,\"pipe_ratio_max\":%.3f}\n",
           wmode, rmode, blocks, block_n * blocks, block_pipe * blocks, window, median(p50[0], blocks),
           median(p50[1], blocks), median(seq_ratio, blocks), seq_lo, seq_hi, median(rate[0], blocks),
           median(rate[1], blocks), median(pipe_ratio, blocks), pipe_lo, pipe_hi);
    fflush(stdout);
}

static void usage(void) {
    fprintf(stderr,
            "usage: probe [--mode seq|pipe|both|history] [--write one|split] [--read block|spin] [-n N] [--warmup N]\n"
            "             [--pipe-n N] [--window W] [--quiet] -- CMD ARGS...\n"
            "       probe --pair BLOCKS [--write ...] [-n N] [--warmup N] [--pipe-n N] [--window W] [--quiet]\n"
            "             -- CMD_A ARGS... --vs CMD_B ARGS...\n");
    exit(2);
}

static int quiet = 0;

/* Starts `cmd` on two fresh pipes, initializes it and, unless `session` is NULL, creates
 * that session: the server is left loaded in the globals. */
static void start(struct server *server, char **cmd, const char *session) {
    int in[2], out[2];
    if (pipe(in) || pipe(out)) die("pipe failed");
    pid_t pid = fork();
    if (pid < 0) die("fork failed");
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        if (quiet) {
            int null = open("/dev/null", O_WRONLY);
            if (null >= 0) dup2(null, 2);
        }
        close(in[0]); close(in[1]); close(out[0]); close(out[1]);
        execvp(cmd[0], cmd);
        perror("probe: exec");
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_child = in[1];
    from_child = out[0];
    rcap = 1 << 20, rstart = rend = 0;
    if (!(rbuf = malloc(rcap))) die("out of memory");
    if (spin_reads) fcntl(from_child, F_SETFL, fcntl(from_child, F_GETFL) | O_NONBLOCK);

    static const char init[] = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{}}";
    send_body(init, sizeof init - 1);
    recv_reply("initialize");
    if (session) {
        char body[256];
        int len = snprintf(body, sizeof body,
                           "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"session/create\",\"params\":{\"session_id\":\"%s\"}}",
                           next_id++, session);
        send_body(body, (size_t)len);
        recv_reply("session/create");
    }
    server->pid = pid;
    save(server);
}

/* Tells the loaded server to exit and waits for it. */
static void stop(const struct server *server) {
    load(server);
    static const char exit_[] = "{\"jsonrpc\":\"2.0\",\"method\":\"exit\"}";
    send_body(exit_, sizeof exit_ - 1);
    close(to_child);
    close(from_child); /* nothing more is read; a late write gets EPIPE, not a hang */
    int status;
    waitpid(server->pid, &status, 0);
}

int main(int argc, char **argv) {
    const char *mode = "both", *wmode = "one", *rmode = "block";
    long n = 20000, warmup = 2000, pipe_n = 100000, window = 64;
    int blocks = 0, i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quiet")) { quiet = 1; continue; }
        if (!v) usage();
        if (!strcmp(a, "--mode")) mode = v;
        else if (!strcmp(a, "--write")) wmode = v;
        else if (!strcmp(a, "--read")) rmode = v;
        else if (!strcmp(a, "-n")) n = atol(v);
        else if (!strcmp(a, "--warmup")) warmup = atol(v);
        else if (!strcmp(a, "--pipe-n")) pipe_n = atol(v);
        else if (!strcmp(a, "--window")) window = atol(v);
        else if (!strcmp(a, "--pair")) blocks = atoi(v);
        else usage();
        i++;
    }
    if (i + 1 >= argc || n <= 0 || window <= 0 || blocks < 0) usage();
    if (strcmp(wmode, "one") && strcmp(wmode, "split")) usage();
    if (strcmp(rmode, "block") && strcmp(rmode, "spin")) usage();
    if (strcmp(mode, "seq") && strcmp(mode, "pipe") && strcmp(mode, "both") && strcmp(mode, "history")) usage();
    split_writes = !strcmp(wmode, "split");
    spin_reads = !strcmp(rmode, "spin");
    char **cmd = argv + i + 1;
    signal(SIGPIPE, SIG_IGN); /* a server that dies shows as a failed write */

    if (blocks > 0) {
        char **vs = cmd;
        while (*vs && strcmp(*vs, "--vs") != 0) vs++;
        if (!*vs || vs == cmd || !vs[1]) usage();
        *vs = NULL; /* ends A's command */
        struct server servers[2];
        start(&servers[0], cmd, "probe");
        start(&servers[1], vs + 1, "probe");
        pair(servers, blocks, n, warmup, pipe_n, window, wmode, rmode);
        stop(&servers[0]);
        stop(&servers[1]);
        return 0;
    }

    struct server server;
    start(&server, cmd, strcmp(mode, "history") ? "probe" : NULL);
    if (!strcmp(mode, "history")) {
        history(window);
    } else {
        if (strcmp(mode, "pipe")) seq(n, warmup, wmode, rmode);
        if (strcmp(mode, "seq")) pipe_rate(pipe_n, window, wmode, rmode);
    }
    stop(&server);
    return 0;
}
