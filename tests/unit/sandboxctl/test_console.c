/* test_console.c - the console's parts without HTTP: the SSE reader
 * (sse.h), the session table (session.h), the denial hub's ring and
 * views (denials.h), the access log's tail (accesslog.h) and the
 * comparison of each egressd's bindings (bindings.h). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accesslog.h"
#include "bindings.h"
#include "config.h"
#include "denials.h"
#include "session.h"
#include "sse.h"
#include "tap.h"

/* ------------------------------------------------------------ sse */

struct seen {
    char text[4096]; /* "event|id|data;" for each event */
    int n;
};

static void on_event(void *arg, const char *event, const char *data, size_t len, const char *id)
{
    struct seen *s = arg;
    size_t used = strlen(s->text);

    snprintf(s->text + used, sizeof s->text - used, "%s|%s|", event, id);
    for (size_t i = 0; i < len && strlen(s->text) + 3 < sizeof s->text; i++)
        strcat(s->text, data[i] == '\n' ? "\\n" : (char[]){data[i], 0});
    strcat(s->text, ";");
    s->n++;
}

/* Feed text to a new reader in pieces of `step` bytes; what it saw. */
static struct seen read_sse(const char *text, size_t len, size_t step, unsigned long *dropped)
{
    struct seen s = {{0}, 0};
    struct sbx_sse r;

    sbx_sse_init(&r, on_event, &s);
    for (size_t i = 0; i < len; i += step)
        sbx_sse_feed(&r, text + i, len - i < step ? len - i : step);
    if (dropped)
        *dropped = r.dropped;
    sbx_sse_free(&r);
    return s;
}

static void test_sse(void)
{
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"id: 7\nevent: denial\ndata: {\"a\":1}\n\n", "denial|7|{\"a\":1};"},
        {"data: x\r\n\r\n", "message||x;"},
        {"data: x\r\rdata: y\r\n\n", "message||x;message||y;"},
        {"data:a\ndata: b\n\n", "message||a\\nb;"},
        {": keepalive\n\n", ""},
        {"event: lost\n\n", ""}, /* no data: no event */
        {"data: x\n", ""},       /* not ended by a blank line */
        {"id: 1\ndata: a\n\ndata: b\n\n", "message|1|a;message|1|b;"},
        {"data: x\nretry: 5\nfoo\n\n", "message||x;"},
        {"data:  two spaces\n\n", "message|| two spaces;"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (size_t step = 1; step <= 3; step += 2) {
            struct seen s = read_sse(cases[i].in, strlen(cases[i].in), step, NULL);
            ok(strcmp(s.text, cases[i].want) == 0, "sse case %zu in pieces of %zu: got '%s'", i,
               step, s.text);
        }
    }
    /* A line longer than the cap spoils its event, which is dropped whole;
     * the next event is read. */
    size_t big = SBX_SSE_LINE_MAX + 10;
    char *text = malloc(big + 64);
    memcpy(text, "data: ", 6);
    memset(text + 6, 'x', big);
    strcpy(text + 6 + big, "\ndata: tail\n\ndata: next\n\n");
    unsigned long dropped;
    struct seen s = read_sse(text, strlen(text), 4096, &dropped);
    ok(strcmp(s.text, "message||next;") == 0 && dropped == 1,
       "an over-long line drops its event whole (%lu dropped), the next is read", dropped);
    free(text);
}

/* ------------------------------------------------------------ sessions */

static void test_sessions(void)
{
    struct sbx_sessions *t = sbx_sessions_new();
    struct sbx_session a, b, got;

    ok(sbx_sessions_open(t, "alice@pve", "alice@pve", false, 60000, &a) == 0 &&
           strlen(a.id) == SBX_SESSION_ID_LEN && strlen(a.csrf) == SBX_SESSION_ID_LEN &&
           strcmp(a.id, a.csrf) != 0,
       "a session has a 43-character id and a different CSRF token");
    ok(sbx_sessions_open(t, "root@pam", "root", true, 60000, &b) == 0 && strcmp(a.id, b.id) != 0,
       "two sessions have different ids");
    ok(sbx_sessions_find(t, a.id, &got) && strcmp(got.user, "alice@pve") == 0 && !got.admin,
       "a session is found by its id, with its user");
    char wrong[SBX_SESSION_ID_LEN + 1];
    memcpy(wrong, a.id, sizeof wrong);
    wrong[5] ^= 1;
    ok(!sbx_sessions_find(t, wrong, &got), "an id one bit away is not a session");
    ok(!sbx_sessions_find(t, "short", &got) && !sbx_sessions_find(t, "", &got),
       "ids of the wrong length are not sessions");
    sbx_sessions_end(t, a.id);
    ok(!sbx_sessions_find(t, a.id, &got) && sbx_sessions_find(t, b.id, &got),
       "a session ended is gone; the other stays");
    ok(sbx_sessions_open(t, "bob@pve", "bob@pve", false, 0, &a) == 0 &&
           !sbx_sessions_find(t, a.id, &got),
       "a session past its lifetime is not found");
    /* More sessions than the table holds: the oldest idle one makes room. */
    struct sbx_session first;
    sbx_sessions_open(t, "u0@pve", "u0", false, 60000, &first);
    for (int i = 1; i <= SBX_SESSIONS_MAX; i++)
        sbx_sessions_open(t, "u@pve", "u", false, 60000, &a);
    ok(!sbx_sessions_find(t, first.id, &got) && sbx_sessions_find(t, a.id, &got),
       "a full table ends the session idle longest, never the newest");
    ok(sbx_session_token_eq("abc", "abc") && !sbx_session_token_eq("abc", "abd") &&
           !sbx_session_token_eq("abc", "abcd") && !sbx_session_token_eq("", "a"),
       "token comparison");
    sbx_sessions_free(t);
}

/* ------------------------------------------------------------ denials */

static json_t *denial(const char *host)
{
    return json_pack("{s:s, s:s, s:i}", "sandbox", "101", "host", host, "port", 443);
}

static void test_denials(void)
{
    struct sbx_config c = {0};
    struct sbx_denials *d = sbx_denials_start(&c, NULL, NULL);
    struct sbx_denials_view admin = {NULL}, alice = {"alice"}, bob = {"bob"};
    uint64_t after = 0, lost = 99;
    json_t *out = json_array(), *j;

    ok(sbx_denials_seq(d) == 0, "an empty hub is at 0");
    j = denial("a.test");
    sbx_denials_keep(d, "unix:/run/e1", j, "sb-a", "alice");
    json_decref(j);
    j = denial("b.test");
    sbx_denials_keep(d, "unix:/run/e2", j, "sb-b", "bob");
    json_decref(j);
    ok(sbx_denials_read(d, &admin, &after, 10, out, &lost) == 2 && after == 2 && lost == 0,
       "an admin sees both, oldest first, and is at 2");
    ok(strcmp(json_string_value(json_object_get(json_array_get(out, 0), "host")), "a.test") == 0 &&
           strcmp(json_string_value(json_object_get(json_array_get(out, 1), "egressd")),
                  "unix:/run/e2") == 0 &&
           json_integer_value(json_object_get(json_array_get(out, 1), "cseq")) == 2,
       "each has its host, its egressd and its number");
    json_array_clear(out);
    after = 0;
    ok(sbx_denials_read(d, &alice, &after, 10, out, NULL) == 1 && after == 2 &&
           strcmp(json_string_value(json_object_get(json_array_get(out, 0), "owner")), "alice") ==
               0,
       "an owner sees only their own sandbox's denial, and moves past the other's");
    json_array_clear(out);
    after = 2;
    ok(sbx_denials_read(d, &bob, &after, 10, out, NULL) == 0 && after == 2,
       "nothing new: nothing read");
    /* Fill past the ring: a reader at 2 has lost what went. */
    for (int i = 0; i < SBX_DENIALS_RING + 5; i++) {
        j = denial("c.test");
        sbx_denials_keep(d, "e", j, "sb-a", "alice");
        json_decref(j);
    }
    after = 2;
    json_array_clear(out);
    size_t n = sbx_denials_read(d, &admin, &after, 3, out, &lost);
    ok(n == 3 && lost == 5 && after == 2 + 5 + 3,
       "a reader behind the ring learns how many it lost (%llu) and goes on from the oldest kept "
       "(now at %llu)",
       (unsigned long long)lost, (unsigned long long)after);
    after = 1u << 30;
    json_array_clear(out);
    ok(sbx_denials_read(d, &admin, &after, 3, out, NULL) == 0 && after == sbx_denials_seq(d),
       "a number from the future (a restarted console) is brought back to now");
    json_decref(out);
    sbx_denials_stop(d);
}

/* ------------------------------------------------------------ access log */

static void test_accesslog(void)
{
    char path[] = "/tmp/test-console-log.XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    json_t *out = NULL;
    size_t scanned = 0;
    char err[256];

    /* A long first line, so that the tail starts inside it, then lines of
     * two sandboxes, one that is not JSON, and a last one without its
     * newline. */
    fputs("{\"sandbox\":\"101\",\"host\":\"", f);
    for (long i = 0; i < SBX_ACCESSLOG_TAIL; i++)
        fputc('x', f);
    fputs("\",\"decision\":\"deny\"}\n", f);
    for (int i = 0; i < 300; i++)
        fprintf(f,
                "{\"sandbox\":\"%s\",\"owner\":\"%s\",\"host\":\"h%d.test\",\"decision\":\"%s\","
                "\"reason\":\"%s\",\"n\":%d}\n",
                i % 2 ? "101" : "102", i % 2 ? "alice" : "bob", i, i % 3 ? "allow" : "deny",
                i % 3 ? "allowed" : "not_allowed", i);
    fputs("not json\n{\"sandbox\":\"101\",\"owner\":\"alice\",\"host\":\"last.test\",\"decision\":"
          "\"allow\",\"n\":999}",
          f);
    fclose(f);

    struct sbx_accesslog_filter all101 = {"101", NULL, NULL, NULL, NULL};
    ok(sbx_accesslog_query(path, &all101, 1000, &out, &scanned, err, sizeof err) == 0 &&
           json_array_size(out) == 151 &&
           json_integer_value(json_object_get(json_array_get(out, 0), "n")) == 999 &&
           json_integer_value(json_object_get(json_array_get(out, 1), "n")) == 299,
       "sandbox 101's lines, newest first, the last one without its newline too (%zu)",
       json_array_size(out));
    bool cut_dropped = true;
    for (size_t i = 0; i < json_array_size(out); i++)
        cut_dropped &=
            strlen(json_string_value(json_object_get(json_array_get(out, i), "host"))) < 100;
    ok(cut_dropped, "the line the tail starts inside is not given (it is not whole)");
    json_decref(out);
    struct sbx_accesslog_filter denied = {"101", "alice", "h1", "deny", "not_allowed"};
    ok(sbx_accesslog_query(path, &denied, 1000, &out, &scanned, err, sizeof err) == 0,
       "a filtered query");
    bool all_match = json_array_size(out) > 0;
    for (size_t i = 0; i < json_array_size(out); i++) {
        json_t *l = json_array_get(out, i);
        all_match &= strstr(json_string_value(json_object_get(l, "host")), "h1") &&
                     strcmp(json_string_value(json_object_get(l, "decision")), "deny") == 0;
    }
    ok(all_match, "  gives only denials to hosts with h1 in them (%zu)", json_array_size(out));
    json_decref(out);
    struct sbx_accesslog_filter other = {"101", "bob", NULL, NULL, NULL};
    ok(sbx_accesslog_query(path, &other, 1000, &out, &scanned, err, sizeof err) == 0 &&
           json_array_size(out) == 0,
       "another owner's view of sandbox 101 is empty");
    json_decref(out);
    ok(sbx_accesslog_query(path, &all101, 5, &out, &scanned, err, sizeof err) == 0 &&
           json_array_size(out) == 5,
       "at most max lines");
    json_decref(out);
    unlink(path);
    ok(sbx_accesslog_query(path, &all101, 5, &out, &scanned, err, sizeof err) == -1 &&
           strstr(err, "console-access-log") && strstr(err, "No such file"),
       "a missing file is an error naming the directive and the cause (%s)", err);
}

/* ------------------------------------------------------------ bindings */

/* What the sandbox of vmid was given for egressd number i, as text. */
static char *noted(json_t *list, int vmid, size_t i)
{
    json_t *sb;
    size_t k;

    json_array_foreach(
        list, k, sb) if (json_integer_value(json_object_get(sb, "vmid")) ==
                         vmid) return json_dumps(json_array_get(json_object_get(sb, "egressd"), i),
                                                 JSON_COMPACT | JSON_SORT_KEYS);
    return NULL;
}

static void test_bindings(void)
{
    json_error_t e;
    json_t *list = json_loads(
        "[{\"vmid\": 101, \"name\": \"a\", \"owner\": \"alice\", \"policy\": \"web\","
        "  \"expires\": \"2026-12-05T10:00:00Z\"},"
        " {\"vmid\": 102, \"name\": \"b\", \"owner\": \"bob\", \"policy\": \"web\","
        "  \"expires\": \"2026-12-05T10:00:00Z\"},"
        " {\"vmid\": 103, \"name\": \"c\", \"owner\": \"carol\", \"policy\": \"web\","
        "  \"expires\": \"2026-12-05T10:00:00Z\"},"
        " {\"vmid\": 104, \"name\": \"d\", \"problem\": \"its description is tampered\"}]",
        0, &e);
    /* 101 in step; 102 with another policy; 103 missing; 104 bound but
     * unreadable in Proxmox; 1010 a binding whose id only starts alike. */
    json_t *bindings = json_loads("[{\"id\": \"101\", \"owner\": \"alice\", \"policy\": \"web\","
                                  "  \"expires\": \"2026-12-05T10:00:00Z\"},"
                                  " {\"id\": \"102\", \"owner\": \"bob\", \"policy\": \"open\","
                                  "  \"expires\": \"2026-12-05T10:00:00Z\"},"
                                  " {\"id\": \"1030\", \"owner\": \"carol\", \"policy\": \"web\","
                                  "  \"expires\": \"2026-12-05T10:00:00Z\"},"
                                  " {\"id\": \"104\", \"owner\": \"dan\", \"policy\": \"web\"}]",
                                  0, &e);
    const char *want[][2] = {
        {"{\"bound\":true,\"egressd\":\"e1\",\"expires\":\"2026-12-05T10:00:00Z\",\"in_step\":"
         "true,\"policy\":\"web\"}",
         "{\"egressd\":\"e2\",\"error\":\"connection refused\"}"},
        {"{\"bound\":true,\"egressd\":\"e1\",\"expires\":\"2026-12-05T10:00:00Z\",\"in_step\":"
         "false,\"policy\":\"open\"}",
         NULL},
        {"{\"bound\":false,\"egressd\":\"e1\",\"in_step\":false}", NULL},
        {"{\"bound\":true,\"egressd\":\"e1\",\"expires\":null,\"in_step\":false,\"policy\":"
         "\"web\"}",
         NULL},
    };

    sbx_bindings_note(list, "e1", bindings, "");
    sbx_bindings_note(list, "e2", NULL, "connection refused");
    for (int i = 0; i < 4; i++) {
        char *got = noted(list, 101 + i, 0);
        ok(got && strcmp(got, want[i][0]) == 0, "bindings: %d against e1: %s", 101 + i,
           got ? got : "(none)");
        free(got);
    }
    char *got = noted(list, 101, 1);
    ok(got && strcmp(got, want[0][1]) == 0, "bindings: an egressd that did not answer says why: %s",
       got ? got : "(none)");
    free(got);
    got = noted(list, 103, 2);
    ok(got == NULL || strcmp(got, "null") == 0, "bindings: two egressd, two entries each");
    free(got);
    json_decref(list);
    json_decref(bindings);
}

int main(void)
{
    test_bindings();
    test_accesslog();
    test_sse();
    test_sessions();
    test_denials();
    return tap_done();
}
