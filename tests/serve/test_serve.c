/* SPDX-License-Identifier: MIT */
/*
 * Sharing one RKNPU among processes (issue 27): `npuvfio serve --model`
 * owns the model, and client processes (serve_client, the unchanged driver
 * on the owner's virtual device) run exact matmuls through it, each in its
 * own IOMMU domain. The owner's counters are read from the table it prints
 * when it stops.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <npuvfio/common.h>

#include "npv_test.h"

#define DEADLINE_MS 60000 /* any one step; a hang fails the step, not the whole run */

struct proc {
    pid_t pid;
    int out; /* its stdout */
    int in;  /* its stdin */
    char buf[8192];
    size_t len;
};

static char dir[64];
static char owner_sock[128];
static char stats_sock[128];

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void spawn(struct proc *p, char *const argv[])
{
    int out[2], in[2];
    ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
    ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
    p->len = 0;
    p->pid = fork();
    ck_assert_int_ge(p->pid, 0);
    if (p->pid == 0) {
        dup2(out[1], 1);
        dup2(in[0], 0);
        execv(argv[0], argv);
        _exit(127);
    }
    close(out[1]);
    close(in[0]);
    p->out = out[0];
    p->in = in[1];
}

/* The next line of p's stdout into line (without '\n'); false at EOF or the deadline. */
static bool next_line(struct proc *p, char *line, size_t max)
{
    int64_t until = now_ms() + DEADLINE_MS;
    for (;;) {
        char *nl = memchr(p->buf, '\n', p->len);
        if (nl != NULL) {
            size_t n = (size_t)(nl - p->buf);
            size_t c = n < max - 1 ? n : max - 1;
            memcpy(line, p->buf, c);
            line[c] = '\0';
            memmove(p->buf, nl + 1, p->len - n - 1);
            p->len -= n + 1;
            return true;
        }
        int left = (int)(until - now_ms());
        struct pollfd pf = {.fd = p->out, .events = POLLIN};
        if (left <= 0 || poll(&pf, 1, left) <= 0 || p->len == sizeof(p->buf))
            return false;
        ssize_t got = read(p->out, p->buf + p->len, sizeof(p->buf) - p->len);
        if (got <= 0)
            return false;
        p->len += (size_t)got;
    }
}

/* Wait for p to end (killing it past the deadline): its wait status. */
static int reap(struct proc *p)
{
    int st = 0;
    int64_t until = now_ms() + DEADLINE_MS;
    while (waitpid(p->pid, &st, WNOHANG) == 0) {
        if (now_ms() > until) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &st, 0);
            break;
        }
        usleep(10000);
    }
    close(p->out);
    if (p->in >= 0)
        close(p->in);
    p->in = -1;
    return st;
}

/* Every line of p until EOF must be consumed by the caller; this one expects a 0 exit. */
static void expect_exit_ok(struct proc *p, const char *what)
{
    int st = reap(p);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: exit status 0x%x", what, st);
}

static void client(struct proc *p, const char *mode, const char *arg)
{
    char *argv[] = {(char *)NPV_SERVE_CLIENT, owner_sock, (char *)mode, (char *)arg, NULL};
    spawn(p, argv);
}

static void expect_line(struct proc *p, const char *want, const char *who)
{
    char line[256];
    ck_assert_msg(next_line(p, line, sizeof(line)), "%s: no line (wanted \"%s\")", who, want);
    ck_assert_msg(strcmp(line, want) == 0, "%s: \"%s\", wanted \"%s\"", who, line, want);
}

/* Start the owner with extra options (NULL-terminated), and wait until it listens. */
static void owner_start(struct proc *o, const char *const *extra)
{
    char *argv[32] = {(char *)NPV_CLI_PATH, "serve",    "--device",       "rknpu",   "--model",
                      "--socket",           owner_sock, "--stats-socket", stats_sock};
    size_t n = 9;
    for (size_t i = 0; extra != NULL && extra[i] != NULL && n < 30; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    spawn(o, argv);
    /* Its first line on stdout says it listens (a stale socket file may be there before). */
    char line[256], want[256];
    snprintf(want, sizeof(want), "npuvfio serve: rknpu (model) serving on %s", owner_sock);
    ck_assert_msg(next_line(o, line, sizeof(line)), "the owner never said it listens");
    ck_assert_str_eq(line, want);
}

struct row {
    unsigned long long id;
    int pid;
    unsigned domain;
    char state[8];
    unsigned long long runs, ok, failed, dropped, peak, refused, mapped, switches;
    double wait_ms;
};

/* Stop the owner (SIGTERM) and read its table: the number of rows. */
static size_t owner_stop(struct proc *o, struct row *rows, size_t max)
{
    kill(o->pid, SIGTERM);
    char line[512];
    size_t n = 0;
    bool header = false;
    while (next_line(o, line, sizeof(line))) {
        if (!header) {
            header = strncmp(line, "client", 6) == 0;
            continue;
        }
        struct row r;
        if (n < max &&
            sscanf(line, "%llu %d %u %7s %llu %llu %llu %llu %llu %llu %llu %llu %lf", &r.id,
                   &r.pid, &r.domain, r.state, &r.runs, &r.ok, &r.failed, &r.dropped, &r.peak,
                   &r.refused, &r.mapped, &r.switches, &r.wait_ms) == 13)
            rows[n++] = r;
    }
    expect_exit_ok(o, "owner");
    return n;
}

/* The owner's live counters through its stats endpoint: `npuvfio stats` (JSON) into buf. */
static void stats_json(char *buf, size_t max)
{
    struct proc st;
    char *argv[] = {(char *)NPV_CLI_PATH, "stats", stats_sock, NULL};
    spawn(&st, argv);
    size_t len = 0;
    int64_t until = now_ms() + DEADLINE_MS;
    for (;;) {
        struct pollfd pf = {.fd = st.out, .events = POLLIN};
        int left = (int)(until - now_ms());
        ck_assert_msg(left > 0 && poll(&pf, 1, left) > 0, "npuvfio stats: no reply");
        ssize_t got = read(st.out, buf + len, max - 1 - len);
        if (got <= 0)
            break;
        len += (size_t)got;
        ck_assert_msg(len < max - 1, "npuvfio stats: reply too long");
    }
    buf[len] = '\0';
    expect_exit_ok(&st, "npuvfio stats");
}

/* Counter name of the client whose pid is pid, in the "serve" source of json. */
static unsigned long long stats_counter(const char *json, pid_t pid, const char *name)
{
    const char *serve = strstr(json, "\"serve\":{");
    ck_assert_msg(serve != NULL, "no \"serve\" source in the stats: %s", json);
    char key[64];
    snprintf(key, sizeof(key), "{\"pid\":%d,", (int)pid);
    const char *at = strstr(serve, key);
    ck_assert_msg(at != NULL, "no client pid %d in the stats", (int)pid);
    const char *end = strchr(at, '}');
    snprintf(key, sizeof(key), "\"%s\":", name);
    const char *c = strstr(at, key);
    ck_assert_msg(c != NULL && c < end, "client pid %d has no %s", (int)pid, name);
    return strtoull(c + strlen(key), NULL, 10);
}

static const struct row *row_of(const struct row *rows, size_t n, pid_t pid)
{
    for (size_t i = 0; i < n; i++)
        if (rows[i].pid == pid)
            return &rows[i];
    ck_abort_msg("no counters for client pid %d", (int)pid);
    return NULL;
}

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/npv-serve-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(owner_sock, sizeof(owner_sock), "%s/owner.sock", dir);
    snprintf(stats_sock, sizeof(stats_sock), "%s/stats.sock", dir);
    signal(SIGPIPE, SIG_IGN);
}

static void teardown(void)
{
    unlink(owner_sock);
    unlink(stats_sock);
    rmdir(dir);
}

/*
 * Acceptance 1: three clients, one killed with a run on its way; the other
 * two stay exact, and the counters show every client's runs and switches.
 */
START_TEST(three_clients_share_one_npu_and_one_killed_mid_run_harms_nobody)
{
    struct proc o, a, b, v, late;
    owner_start(&o, NULL);
    client(&a, "cores", "40");
    client(&b, "runs", "120");
    client(&v, "die", "20");
    char line[128];
    /* The victim's last words: its run was submitted, then SIGKILL. */
    ck_assert(next_line(&v, line, sizeof(line)));
    ck_assert_str_eq(line, "submitted 0");
    int st = reap(&v);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "victim: status 0x%x", st);
    expect_line(&a, "ok 40", "client a");
    expect_line(&b, "ok 120", "client b");
    expect_exit_ok(&a, "client a");
    expect_exit_ok(&b, "client b");
    /*
     * Every client gone (their connections close as they exit; the owner
     * then releases each): no domain is left on the device.
     */
    static char json[65536];
    int64_t until = now_ms() + DEADLINE_MS;
    for (;;) {
        stats_json(json, sizeof(json));
        const char *owner_at = strstr(json, "\"owner\":{");
        ck_assert_ptr_nonnull(owner_at);
        if (strstr(owner_at, "\"clients\":0,") && strstr(owner_at, "\"domains_live\":0,"))
            break;
        ck_assert_msg(now_ms() < until, "domains left after every client went: %s", owner_at);
        usleep(20000);
    }
    /* The counters, through the stats endpoint (npuvfio stats). */
    ck_assert_uint_eq(stats_counter(json, a.pid, "runs_ok"), 120);
    ck_assert_uint_eq(stats_counter(json, b.pid, "runs_ok"), 120);
    ck_assert_uint_ge(stats_counter(json, v.pid, "runs"), 21);
    ck_assert_uint_eq(stats_counter(json, v.pid, "mapped_bytes"), 0);
    ck_assert_uint_eq(stats_counter(json, v.pid, "connected"), 0);
    for (size_t i = 0; i < 3; i++) {
        pid_t pid = i == 0 ? a.pid : i == 1 ? b.pid : v.pid;
        ck_assert_uint_ge(stats_counter(json, pid, "switches"), 1);
    }
    /* Its domain and slot came back: a new client is served, exact. */
    client(&late, "runs", "5");
    expect_line(&late, "ok 5", "late client");
    expect_exit_ok(&late, "late client");

    struct row rows[8];
    size_t n = owner_stop(&o, rows, 8);
    ck_assert_uint_eq(n, 4);
    const struct row *ra = row_of(rows, n, a.pid), *rb = row_of(rows, n, b.pid);
    const struct row *rv = row_of(rows, n, v.pid), *rl = row_of(rows, n, late.pid);
    ck_assert_uint_eq(ra->ok, 120); /* 40 rounds of three */
    ck_assert_uint_eq(rb->ok, 120);
    ck_assert_uint_ge(rv->ok, 20);
    ck_assert_uint_eq(rv->runs, rv->ok + rv->failed + rv->dropped);
    ck_assert_uint_eq(rl->ok, 5);
    for (size_t i = 0; i < n; i++) {
        ck_assert_str_eq(rows[i].state, "left");
        ck_assert_uint_eq(rows[i].failed, 0);
        ck_assert_uint_eq(rows[i].mapped, 0); /* every mapping released */
        ck_assert_uint_ge(rows[i].switches, 1);
        ck_assert_uint_lt(rows[i].domain, 16);
    }
    /* Clients at the same time have domains of their own. */
    ck_assert_uint_ne(ra->domain, rb->domain);
    ck_assert_uint_ne(ra->domain, rv->domain);
    ck_assert_uint_ne(rb->domain, rv->domain);
}
END_TEST

/*
 * Acceptance 2: a client's run addressing another client's IOVA faults
 * (write and read), and the other's buffer is unchanged.
 */
START_TEST(a_run_addressing_another_clients_iova_faults_and_changes_nothing)
{
    struct proc o, v, w, r, ctl;
    owner_start(&o, NULL);
    /* 32 MiB first: the pattern lies far above anything the intruder maps. */
    client(&v, "victim", "33554432");
    char line[128], iova[64];
    ck_assert(next_line(&v, line, sizeof(line)));
    ck_assert_int_eq(sscanf(line, "iova %63s", iova), 1);

    client(&w, "write", iova);
    expect_line(&w, "status -5", "writer"); /* -EIO: the core's DMA write fault */
    expect_exit_ok(&w, "writer");
    client(&r, "read", iova);
    expect_line(&r, "status -5", "reader");
    expect_exit_ok(&r, "reader");

    ck_assert_int_eq(write(v.in, "check\n", 6), 6);
    expect_line(&v, "intact", "victim");
    expect_exit_ok(&v, "victim");
    /* The faults cost nobody else anything: the device still runs exact. */
    client(&ctl, "runs", "3");
    expect_line(&ctl, "ok 3", "control");
    expect_exit_ok(&ctl, "control");

    struct row rows[8];
    size_t n = owner_stop(&o, rows, 8);
    ck_assert_uint_eq(row_of(rows, n, w.pid)->failed, 1);
    ck_assert_uint_eq(row_of(rows, n, r.pid)->failed, 1);
    ck_assert_uint_eq(row_of(rows, n, ctl.pid)->ok, 3);
}
END_TEST

/*
 * Acceptance 2: a client over its limits is refused (bytes) or held to its
 * share (runs on the device at once); the others are not touched.
 */
START_TEST(a_client_over_its_limits_is_refused_and_the_others_are_not)
{
    struct proc o, big, burst, steady;
    static const char *const limits[] = {"--max-bytes", "8M", "--max-jobs", "1", NULL};
    owner_start(&o, limits);
    client(&steady, "runs", "60");
    client(&big, "map", "16777216");
    expect_line(&big, "map 0", "big mapper");
    /* Its maps reach the owner with its first run, which fails: -EDQUOT. */
    expect_line(&big, "run 0 status -122", "big mapper");
    expect_line(&big, "ok 1", "big mapper"); /* and it goes on within its limits */
    expect_exit_ok(&big, "big mapper");
    client(&burst, "burst", NULL);
    /* Three at once, one on the device at a time: all exact, none refused. */
    expect_line(&burst, "accepted 3 refused 0 exact 3", "burst");
    expect_exit_ok(&burst, "burst");
    expect_line(&steady, "ok 60", "steady");
    expect_exit_ok(&steady, "steady");
    struct row rows[8];
    size_t n = owner_stop(&o, rows, 8);
    ck_assert_uint_ge(row_of(rows, n, big.pid)->refused, 1);
    ck_assert_uint_eq(row_of(rows, n, burst.pid)->peak, 1);
    ck_assert_uint_eq(row_of(rows, n, burst.pid)->ok, 3);
    ck_assert_uint_eq(row_of(rows, n, steady.pid)->refused, 0);
    ck_assert_uint_eq(row_of(rows, n, steady.pid)->ok, 60);
    ck_assert_uint_eq(row_of(rows, n, steady.pid)->peak, 1);
}
END_TEST

/* One client more than --max-clients is refused with EUSERS; one leaving makes room. */
START_TEST(a_client_beyond_max_clients_is_refused_with_eusers)
{
    struct proc o, c1, c2, extra, after;
    static const char *const limits[] = {"--max-clients", "2", NULL};
    owner_start(&o, limits);
    client(&c1, "orphan", NULL);
    client(&c2, "orphan", NULL);
    expect_line(&c1, "ready", "first");
    expect_line(&c2, "ready", "second");
    client(&extra, "runs", "1");
    expect_line(&extra, "open -87", "third"); /* -EUSERS */
    int st = reap(&extra);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    ck_assert_int_eq(write(c1.in, "go\n", 3), 3);
    expect_line(&c1, "after 0", "first");
    reap(&c1); /* "after 0" is not the orphan's success: its exit status says so */
    client(&after, "runs", "2");
    expect_line(&after, "ok 2", "after one left");
    expect_exit_ok(&after, "after one left");
    ck_assert_int_eq(write(c2.in, "go\n", 3), 3);
    expect_line(&c2, "after 0", "second");
    reap(&c2);
    struct row rows[8];
    owner_stop(&o, rows, 8);
}
END_TEST

/*
 * A client that takes the slot of one that left has a new domain (the
 * driver frees the old one and attaches the new one, driver_domain.c), so
 * its first turn is a switch and is counted, even when the slot it takes
 * was the last on the device. --max-clients 1: the second client can only
 * have the first one's slot, once the owner has released it (until then it
 * is refused with -EUSERS and tries again).
 */
START_TEST(a_client_in_a_released_slot_counts_its_first_switch)
{
    struct proc o, a, b;
    static const char *const one[] = {"--max-clients", "1", NULL};
    owner_start(&o, one);
    client(&a, "runs", "3");
    expect_line(&a, "ok 3", "first");
    expect_exit_ok(&a, "first");
    char line[128] = "";
    for (int tries = 0; tries < 500; tries++) {
        client(&b, "runs", "3");
        ck_assert(next_line(&b, line, sizeof(line)));
        if (strcmp(line, "open -87") != 0)
            break;
        reap(&b);
        usleep(10000);
    }
    ck_assert_str_eq(line, "ok 3");
    expect_exit_ok(&b, "second");
    struct row rows[4];
    size_t n = owner_stop(&o, rows, 4);
    ck_assert_uint_eq(n, 2);
    const struct row *ra = row_of(rows, n, a.pid), *rb = row_of(rows, n, b.pid);
    ck_assert_uint_eq(ra->domain, rb->domain);
    ck_assert_uint_ge(ra->switches, 1);
    ck_assert_uint_ge(rb->switches, 1);
}
END_TEST

/*
 * A client maps a memfd of one page as two (mmap allows a mapping past its
 * file's end; touching that part is SIGBUS) and runs a matmul that reads the
 * page past the end. It fails, and only its own run: the owner's device
 * (the model, a process that maps what the owner maps for it) does not die
 * of SIGBUS, so the other clients go on and the owner stops cleanly.
 */
START_TEST(a_map_past_the_end_of_its_file_fails_that_client_only)
{
    struct proc o, bad, ctl;
    owner_start(&o, NULL);
    client(&bad, "shortmap", NULL);
    char line[128];
    ck_assert_msg(next_line(&bad, line, sizeof(line)), "shortmap: no line");
    ck_assert_msg(strncmp(line, "status -", 8) == 0, "shortmap: \"%s\", wanted a failure", line);
    expect_exit_ok(&bad, "shortmap");
    client(&ctl, "runs", "3");
    expect_line(&ctl, "ok 3", "control");
    expect_exit_ok(&ctl, "control");
    struct row rows[4];
    size_t n = owner_stop(&o, rows, 4);
    ck_assert_uint_eq(row_of(rows, n, ctl.pid)->ok, 3);
}
END_TEST

/*
 * Every mapping of a client holds an fd of the owner's. A client mapping one
 * page at many IOVAs (a raw vfio-user client: any process on the socket) is
 * refused past its share (ENOSPC, counted), and the owner keeps the fds to
 * accept and serve another client. The owner runs with 128 fds and two
 * clients at most, so the share is small: (128 - 64) / 2 - 8 = 24 maps.
 */
START_TEST(a_client_hoarding_mappings_leaves_the_owner_fds_for_the_others)
{
    struct proc o, h, ctl;
    struct rlimit old, low;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
    low = old;
    low.rlim_cur = 128;
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
    static const char *const two[] = {"--max-clients", "2", NULL};
    owner_start(&o, two);
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0); /* the clients' own */
    client(&h, "hoard", "200");
    char line[128];
    unsigned accepted = 0, refused = 0;
    int err = 0;
    ck_assert_msg(next_line(&h, line, sizeof(line)), "hoarder: no line");
    ck_assert_msg(sscanf(line, "hoard %u refused %u err %d", &accepted, &refused, &err) == 3,
                  "hoarder: \"%s\"", line);
    ck_assert_uint_eq(accepted + refused, 200);
    ck_assert_uint_eq(accepted, 24);
    ck_assert_int_eq(err, ENOSPC);
    /* While it holds them, another client connects, maps and runs exact. */
    client(&ctl, "runs", "3");
    expect_line(&ctl, "ok 3", "control");
    expect_exit_ok(&ctl, "control");
    ck_assert_int_eq(write(h.in, "go\n", 3), 3);
    expect_exit_ok(&h, "hoarder");
    struct row rows[4];
    size_t n = owner_stop(&o, rows, 4);
    ck_assert_uint_eq(row_of(rows, n, h.pid)->refused, refused);
    ck_assert_uint_eq(row_of(rows, n, ctl.pid)->refused, 0);
}
END_TEST

/*
 * A run the driver refuses (a client's TASK_CON of no task) never reached
 * the device: it is a failed run of its client and no switch to its domain,
 * so the clients' switches add up to the device's.
 */
START_TEST(a_run_the_driver_refuses_counts_no_switch)
{
    struct proc o, bad, ctl;
    owner_start(&o, NULL);
    client(&bad, "badrun", NULL);
    expect_line(&bad, "started 0", "bad run");
    client(&ctl, "runs", "2");
    expect_line(&ctl, "ok 2", "control");
    expect_exit_ok(&ctl, "control");
    /* The device's switches (its driver's count) against the clients' own. */
    static char json[65536];
    stats_json(json, sizeof(json));
    const char *owner_at = strstr(json, "\"owner\":{");
    ck_assert_ptr_nonnull(owner_at);
    const char *sw = strstr(owner_at, "\"domain_switches\":");
    ck_assert_ptr_nonnull(sw);
    unsigned long long device_switches = strtoull(sw + strlen("\"domain_switches\":"), NULL, 10);
    unsigned long long bad_switches = stats_counter(json, bad.pid, "switches");
    unsigned long long ctl_switches = stats_counter(json, ctl.pid, "switches");
    ck_assert_uint_eq(bad_switches, 0);
    ck_assert_uint_eq(bad_switches + ctl_switches, device_switches);
    ck_assert_int_eq(write(bad.in, "go\n", 3), 3);
    expect_exit_ok(&bad, "bad run");
    struct row rows[4];
    size_t n = owner_stop(&o, rows, 4);
    ck_assert_uint_eq(row_of(rows, n, bad.pid)->runs, 1);
    ck_assert_uint_eq(row_of(rows, n, bad.pid)->failed, 1);
    ck_assert_uint_eq(row_of(rows, n, bad.pid)->switches, 0);
}
END_TEST

/*
 * A connection that never sends VERSION (any process on the socket can
 * make one) does not keep a client's slot and domain: the owner drops it
 * (the spec: VERSION comes first), and the slot serves the next client.
 * --max-clients 1: the silent connection holds the only slot until then.
 */
START_TEST(a_connection_that_never_negotiates_gives_its_slot_back)
{
    struct proc o, quiet, next;
    static const char *const one[] = {"--max-clients", "1", NULL};
    owner_start(&o, one);
    client(&quiet, "silent", NULL);
    expect_line(&quiet, "closed", "silent connection");
    expect_exit_ok(&quiet, "silent connection");
    /* Its slot comes back once the owner has released it (until then: -EUSERS). */
    char line[128] = "";
    for (int tries = 0; tries < 500; tries++) {
        client(&next, "runs", "1");
        ck_assert(next_line(&next, line, sizeof(line)));
        if (strcmp(line, "open -87") != 0)
            break;
        reap(&next);
        usleep(10000);
    }
    ck_assert_str_eq(line, "ok 1");
    expect_exit_ok(&next, "next client");
    struct row rows[4];
    owner_stop(&o, rows, 4);
}
END_TEST

/*
 * With every slot taken, connections that send nothing queue up before a
 * client that speaks: it is still told EUSERS at once, not left to time out
 * behind them (the owner waits for each one's VERSION off its accept loop).
 */
START_TEST(silent_connections_do_not_delay_the_refusal_of_the_next_client)
{
    struct proc o, c1, quiet, extra;
    static const char *const one[] = {"--max-clients", "1", NULL};
    owner_start(&o, one);
    client(&c1, "orphan", NULL);
    expect_line(&c1, "ready", "first");
    client(&quiet, "silentmany", "12");
    char line[128];
    ck_assert(next_line(&quiet, line, sizeof(line)));
    ck_assert_msg(strncmp(line, "held ", 5) == 0 && atoi(line + 5) >= 8, "silent: \"%s\"", line);
    client(&extra, "runs", "1");
    expect_line(&extra, "open -87", "a client behind them"); /* -EUSERS, not -ETIMEDOUT */
    reap(&extra);
    ck_assert_int_eq(write(quiet.in, "go\n", 3), 3);
    expect_exit_ok(&quiet, "silent connections");
    ck_assert_int_eq(write(c1.in, "go\n", 3), 3);
    expect_line(&c1, "after 0", "first");
    reap(&c1);
    struct row rows[4];
    owner_stop(&o, rows, 4);
}
END_TEST

/* Who may connect is the socket's mode: 0600 by default, 0660 and the group with --group. */
START_TEST(the_socket_admits_the_owners_user_or_its_group)
{
    struct proc o;
    struct stat st;
    owner_start(&o, NULL);
    ck_assert_int_eq(stat(owner_sock, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0600);
    struct row rows[2];
    owner_stop(&o, rows, 2);

    struct group *gr = getgrgid(getegid());
    ck_assert_ptr_nonnull(gr);
    const char *const grp[] = {"--group", gr->gr_name, NULL};
    owner_start(&o, grp);
    ck_assert_int_eq(stat(owner_sock, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0660);
    ck_assert_uint_eq(st.st_gid, getegid());
    owner_stop(&o, rows, 2);
}
END_TEST

/*
 * The owner dies: a client's next run fails with an error within its
 * deadline, never hangs; a restarted owner on the same socket serves again.
 */
START_TEST(an_owner_that_dies_fails_its_clients_and_a_new_one_serves)
{
    struct proc o, orphan, o2, fresh, dup;
    owner_start(&o, NULL);
    /* A live owner's socket is never taken: a second owner on it exits 1. */
    char *dup_argv[] = {(char *)NPV_CLI_PATH, "serve",    "--device", "rknpu", "--model",
                        "--socket",           owner_sock, NULL};
    spawn(&dup, dup_argv);
    int dst = reap(&dup);
    ck_assert_msg(WIFEXITED(dst) && WEXITSTATUS(dst) == 1, "second owner: status 0x%x", dst);
    client(&orphan, "orphan", "1");
    expect_line(&orphan, "ready", "orphan");
    kill(o.pid, SIGKILL);
    reap(&o);
    ck_assert_int_eq(write(orphan.in, "go\n", 3), 3);
    char line[128];
    ck_assert(next_line(&orphan, line, sizeof(line)));
    int err = 0;
    ck_assert_int_eq(sscanf(line, "after %d", &err), 1);
    /* The socket is gone: the transport says so (ENOTCONN, ECONNRESET or EPIPE), no hang. */
    ck_assert_msg(err == -ENOTCONN || err == -ECONNRESET || err == -EPIPE,
                  "a run without its owner: status %d", err);

    owner_start(&o2, NULL); /* the dead owner's socket is stale: replaced */
    /* The same client process opens the device again on the new owner. */
    ck_assert_int_eq(write(orphan.in, "again\n", 6), 6);
    expect_line(&orphan, "again ok 1", "orphan");
    expect_exit_ok(&orphan, "orphan");
    client(&fresh, "runs", "3");
    expect_line(&fresh, "ok 3", "fresh");
    expect_exit_ok(&fresh, "fresh");
    struct row rows[4];
    ck_assert_uint_eq(owner_stop(&o2, rows, 4), 2);
}
END_TEST

/*
 * The device goes away under the owner (its model's server is killed): the
 * owner notices by itself, drops every client and exits 1. A client with a
 * run on the device and an idle one both fail with an error within their
 * deadline, never hang, and a new client is not served by a dead owner.
 */
START_TEST(a_lost_device_stops_the_owner_and_fails_its_clients)
{
    char dev_sock[160], line[256], want[512];
    snprintf(dev_sock, sizeof(dev_sock), "%s/device.sock", dir);
    struct proc sim, o, idle, busy;
    char *sim_argv[] = {(char *)NPV_CLI_PATH, "sim",    "--device", "rknpu",
                        "--socket",           dev_sock, NULL};
    spawn(&sim, sim_argv);
    /* It binds under another name and renames into place: the file means it listens. */
    int64_t until = now_ms() + DEADLINE_MS;
    while (access(dev_sock, F_OK) != 0 && now_ms() < until)
        usleep(10000);
    ck_assert_msg(access(dev_sock, F_OK) == 0, "npuvfio sim never listened");
    char *own_argv[] = {
        (char *)NPV_CLI_PATH, "serve",    "--device", "rknpu", "--device-socket", dev_sock,
        "--socket",           owner_sock, NULL};
    /*
     * The owner of a lost device exits with its clients' mappings
     * quarantined, not freed: their unmaps fail on the dead transport, and a
     * quarantined IOVA is kept until the process ends because the device's
     * server may still reach it (npv_dma_unmap, dma.h). That is no leak to
     * report in this one process; every other owner runs with detection.
     */
    const char *asan = getenv("ASAN_OPTIONS");
    char *saved = asan != NULL ? strdup(asan) : NULL;
    char no_leaks[512];
    snprintf(no_leaks, sizeof(no_leaks), "%s%sdetect_leaks=0", saved ? saved : "",
             saved ? ":" : "");
    setenv("ASAN_OPTIONS", no_leaks, 1);
    spawn(&o, own_argv);
    if (saved != NULL)
        setenv("ASAN_OPTIONS", saved, 1);
    else
        unsetenv("ASAN_OPTIONS");
    free(saved);
    snprintf(want, sizeof(want), "npuvfio serve: rknpu (%s) serving on %s", dev_sock, owner_sock);
    ck_assert_msg(next_line(&o, line, sizeof(line)), "the owner never said it listens");
    ck_assert_str_eq(line, want);

    client(&idle, "orphan", NULL);
    expect_line(&idle, "ready", "idle client");
    client(&busy, "runs", "1000000");
    usleep(200000); /* it has runs on the way */
    kill(sim.pid, SIGKILL);
    reap(&sim);

    int st = reap(&o); /* killed past DEADLINE_MS: an owner that never noticed fails here */
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "owner of a lost device: status 0x%x", st);
    ck_assert_int_eq(write(idle.in, "go\n", 3), 3);
    ck_assert_msg(next_line(&idle, line, sizeof(line)), "idle client: no line");
    int err = 0;
    ck_assert_int_eq(sscanf(line, "after %d", &err), 1);
    ck_assert_msg(err == -ENOTCONN || err == -ECONNRESET || err == -EPIPE,
                  "idle client of a lost device: status %d", err);
    reap(&idle);
    unsigned long long k = 0;
    ck_assert_msg(next_line(&busy, line, sizeof(line)), "busy client: no line");
    /*
     * Its connection ended under it: a call fails with the transport's error,
     * or its wait reads the interrupt status of a connection that is gone as
     * all ones, an impossible status (-NPV_EDEVFAULT, as a PCIe read of a
     * removed function would be).
     */
    ck_assert_msg(
        sscanf(line, "run %llu status %d", &k, &err) == 2 &&
            (err == -ENOTCONN || err == -ECONNRESET || err == -EPIPE || err == -NPV_EDEVFAULT),
        "busy client of a lost device: \"%s\"", line);
    st = reap(&busy);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "busy client: status 0x%x", st);
    unlink(dev_sock);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("serve");
    TCase *tc = tcase_create("owner");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, three_clients_share_one_npu_and_one_killed_mid_run_harms_nobody);
    tcase_add_test(tc, a_run_addressing_another_clients_iova_faults_and_changes_nothing);
    tcase_add_test(tc, a_client_over_its_limits_is_refused_and_the_others_are_not);
    tcase_add_test(tc, a_client_beyond_max_clients_is_refused_with_eusers);
    tcase_add_test(tc, the_socket_admits_the_owners_user_or_its_group);
    tcase_add_test(tc, an_owner_that_dies_fails_its_clients_and_a_new_one_serves);
    tcase_add_test(tc, a_client_in_a_released_slot_counts_its_first_switch);
    tcase_add_test(tc, a_lost_device_stops_the_owner_and_fails_its_clients);
    tcase_add_test(tc, a_map_past_the_end_of_its_file_fails_that_client_only);
    tcase_add_test(tc, a_client_hoarding_mappings_leaves_the_owner_fds_for_the_others);
    tcase_add_test(tc, a_run_the_driver_refuses_counts_no_switch);
    tcase_add_test(tc, a_connection_that_never_negotiates_gives_its_slot_back);
    tcase_add_test(tc, silent_connections_do_not_delay_the_refusal_of_the_next_client);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}
