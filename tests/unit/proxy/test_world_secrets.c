/*
 * test_world_secrets.c - the world's secrets (proxy/world.c with
 * proxy/secrets.c): `secret-dir` in egressd.conf; the store each world
 * holds; a binding's "secrets" checked field by field (400) and against
 * the store (422, with "did you mean"); shown by GET, persisted, restored;
 * a reload that drops a secret keeps the binding and warns; a bad
 * secret-dir at a reload keeps the old world; an old world keeps its own
 * store.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "metrics.h"
#include "policy_load.h"
#include "secrets.h"
#include "tap.h"
#include "world.h"

static char dir[256];
static struct px_config cfg;
static struct px_geo geo;
static char err[65536];

static void write_file(const char *name, const char *text, mode_t mode)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd == -1 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) ||
        fchmod(fd, mode) == -1 || close(fd) == -1) {
        perror(path);
        exit(1);
    }
}

static void remove_file(const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    unlink(path);
}

static char *read_state(void)
{
    static char buf[65536];
    char path[512];
    snprintf(path, sizeof(path), "%s/state/sandboxes.json", dir);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f != NULL)
        fclose(f);
    buf[n] = '\0';
    return buf;
}

static bool err_has(const char *s)
{
    if (strstr(err, s) != NULL)
        return true;
    diag("error was: %s", err);
    diag("wanted:    %s", s);
    return false;
}

static int put(const char *id, const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    if (j == NULL) {
        fprintf(stderr, "bad test JSON %s: %s\n", text, je.text);
        exit(1);
    }
    int rc = px_world_put_sandbox(id, j, err, sizeof(err));
    json_decref(j);
    return rc;
}

/* Diagnostics (stderr) captured between capture_start() and capture_end(). */
static int saved_stderr = -1;

static void capture_start(void)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/stderr", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    fflush(stderr);
    saved_stderr = dup(2);
    if (fd == -1 || saved_stderr == -1 || dup2(fd, 2) == -1)
        exit(1);
    close(fd);
}

static const char *capture_end(void)
{
    static char buf[8192];
    char path[512];
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    snprintf(path, sizeof(path), "%s/stderr", dir);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f != NULL)
        fclose(f);
    buf[n] = '\0';
    return buf;
}

/* Load egressd.conf with `text`; err filled. */
static int config(const char *text)
{
    char path[512];
    write_file("egressd.conf", text, 0600);
    snprintf(path, sizeof(path), "%s/egressd.conf", dir);
    err[0] = '\0';
    return px_config_load(&cfg, path, err, sizeof(err));
}

static const char *conf_with = "listen 127.0.0.1:3128\n"
                               "policy-dir policies\n"
                               "default-policy test\n"
                               "state-dir state\n"
                               "secret-dir secrets\n";

static void setup(void)
{
    char path[512];

    snprintf(dir, sizeof(dir), "%s/test_world_secrets.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(path, sizeof(path), "%s/policies", dir);
    mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/secrets", dir);
    mkdir(path, 0700);
    write_file("policies/test.allow", "a.test\n", 0600);
    write_file("secrets/anthropic", "sk-ant-VALUE\n", 0600);
    write_file("secrets/github", "ghp-VALUE\n", 0600);
    memset(&geo, 0, sizeof(geo));
}

static void test_config(void)
{
    char want[600];

    ok(config(conf_with) == 0, "secret-dir is a directive");
    snprintf(want, sizeof(want), "%s/secrets", dir);
    ok(strcmp(cfg.secret_dir, want) == 0, "relative to the config's directory");
    ok(config("listen 127.0.0.1:3128\npolicy-dir policies\nsecret-dir /s\n") == -1 &&
           err_has("egressd.conf: secret-dir needs state-dir (the appliance key, which "
                   "placeholders are derived from, is kept there)"),
       "secret-dir without state-dir is an error");
    ok(config("listen 127.0.0.1:3128\npolicy-dir policies\nsecret-dri /s\n") == -1 &&
           err_has("egressd.conf:3: unknown directive 'secret-dri'; did you mean 'secret-dir'?"),
       "a misspelt secret-dir: did you mean");
    ok(config("listen 127.0.0.1:3128\npolicy-dir policies\n") == 0 && cfg.secret_dir[0] == '\0',
       "without it: none");
}

static void test_store(void)
{
    const char *p;
    size_t len;

    ok(config(conf_with) == 0, "config with secret-dir");
    err[0] = '\0';
    ok(px_world_init(&cfg, &geo, err, sizeof(err)) == 0, "init loads it");
    struct px_world *w = px_world_get();
    ok(w->secrets != NULL && px_secrets_count(w->secrets) == 2 &&
           px_secrets_get(w->secrets, "anthropic", &p, &len) && strcmp(p, "sk-ant-VALUE") == 0,
       "the world holds the store");
    px_world_put(w);
}

struct bad {
    const char *json, *want;
    int status;
};

static void test_bindings(void)
{
    static const struct bad bad[] = {
        {"{\"policy\":\"test\",\"secrets\":\"anthropic\"}",
         "sandbox 201: secrets: expected an array of at most 16 secret names, found 'anthropic'",
         400},
        {"{\"policy\":\"test\",\"secrets\":[\"anthropic\",7]}",
         "sandbox 201: secrets[1]: expected a secret's name ([a-z0-9][a-z0-9_-]{0,62}), found an "
         "integer",
         400},
        {"{\"policy\":\"test\",\"secrets\":[\"Anthropic\"]}",
         "sandbox 201: secrets[0]: expected a secret's name ([a-z0-9][a-z0-9_-]{0,62}), found "
         "'Anthropic'",
         400},
        {"{\"policy\":\"test\",\"secrets\":[\"x~\"]}", "secrets[0]: expected a secret's name", 400},
        {"{\"policy\":\"test\",\"secrets\":[\"github\",\"anthropic\",\"github\"]}",
         "sandbox 201: secrets[2]: 'github' is listed twice", 400},
        {"{\"policy\":\"test\",\"secrts\":[]}",
         "sandbox 201: unknown field 'secrts' (did you mean 'secrets'?)", 400},
        {"{\"policy\":\"test\",\"secrets\":[\"anthropc\"]}",
         "sandbox 201: secrets: no secret 'anthropc' in secret-dir; did you mean 'anthropic'?",
         422},
        {"{\"policy\":\"test\",\"secrets\":[\"github\",\"openai\"]}",
         "sandbox 201: secrets: no secret 'openai' in secret-dir", 422},
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ok(put("201", bad[i].json) == -1 && px_world_error_status() == bad[i].status &&
               err_has(bad[i].want),
           "refused (%d): %s", bad[i].status, bad[i].want);
    ok(strstr(err, "did you mean") == NULL, "no 'did you mean' when nothing is near");

    json_t *big = json_pack("{s:s,s:[]}", "policy", "test", "secrets");
    for (int i = 0; i < 17; i++)
        json_array_append_new(json_object_get(big, "secrets"), json_string("github"));
    ok(px_world_put_sandbox("201", big, err, sizeof(err)) == -1 &&
           err_has("secrets: expected an array of at most 16 secret names, found 17"),
       "17 names are too many");
    json_decref(big);

    ok(put("201", "{\"policy\":\"test\",\"addresses\":[\"10.9.0.1\"],"
                  "\"secrets\":[\"github\",\"anthropic\"]}") == 0,
       "a binding with two secrets");
    struct px_world *w = px_world_get();
    const struct px_sandbox *sb = px_world_by_id(w, "201");
    ok(sb != NULL && sb->n_secrets == 2 && strcmp(sb->secrets[0], "github") == 0 &&
           strcmp(sb->secrets[1], "anthropic") == 0,
       "its secrets, in the order given");
    px_world_put(w);
    json_t *all = px_world_sandboxes_json();
    char *text = json_dumps(json_object_get(json_array_get(all, 0), "secrets"), JSON_COMPACT);
    ok(text != NULL && strcmp(text, "[\"github\",\"anthropic\"]") == 0, "GET shows their names");
    free(text);
    text = json_dumps(all, 0);
    ok(text != NULL && strstr(text, "VALUE") == NULL, "  and no value");
    free(text);
    json_decref(all);
    ok(strstr(read_state(), "\"anthropic\"") != NULL && strstr(read_state(), "VALUE") == NULL,
       "the state file keeps the names, not the values");
    ok(put("202", "{\"policy\":\"test\",\"secrets\":[]}") == 0 &&
           put("203", "{\"policy\":\"test\",\"secrets\":null}") == 0,
       "an empty list and null are fine");
    w = px_world_get();
    ok(px_world_by_id(w, "202")->n_secrets == 0 && px_world_by_id(w, "203")->n_secrets == 0,
       "  and name none");
    px_world_put(w);

    json_t *arr = json_pack("[{s:s,s:s,s:[s]},{s:s,s:s,s:[s]}]", "id", "301", "policy", "test",
                            "secrets", "github", "id", "302", "policy", "test", "secrets", "gthub");
    ok(px_world_replace_sandboxes(arr, err, sizeof(err)) == -1 && px_world_error_status() == 422 &&
           err_has("sandbox 302: secrets: no secret 'gthub' in secret-dir; did you mean 'github'?"),
       "replacing all bindings checks the secrets too");
    json_decref(arr);
}

static void test_reload(void)
{
    const char *p;
    size_t len;

    struct px_world *old = px_world_get();
    remove_file("secrets/anthropic");
    capture_start();
    int rc = px_world_reload(err, sizeof(err));
    const char *log = capture_end();
    ok(rc == 0, "a reload with a secret gone works");
    ok(strstr(log, "sandbox 201: secrets: no secret 'anthropic' in secret-dir (the binding stays; "
                   "requests that need the secret are denied)") != NULL,
       "and warns, naming sandbox and secret");
    if (strstr(log, "sandbox 201") == NULL)
        diag("log was: %s", log);
    struct px_world *w = px_world_get();
    const struct px_sandbox *sb = px_world_by_id(w, "201");
    ok(sb != NULL && sb->n_secrets == 2 && strcmp(sb->secrets[1], "anthropic") == 0,
       "the binding is kept, naming the secret still");
    ok(!px_secrets_get(w->secrets, "anthropic", &p, &len) &&
           px_secrets_get(w->secrets, "github", &p, &len),
       "the new world's store lacks it");
    ok(px_secrets_get(old->secrets, "anthropic", &p, &len) && strcmp(p, "sk-ant-VALUE") == 0,
       "a world held from before keeps its own store, value and all");
    px_world_put(old);
    ok(put("204", "{\"policy\":\"test\",\"secrets\":[\"anthropic\"]}") == -1 &&
           px_world_error_status() == 422 && err_has("no secret 'anthropic'"),
       "a new binding cannot name it");
    ok(put("201", "{\"policy\":\"test\",\"addresses\":[\"10.9.0.1\"],\"secrets\":[\"github\"]}") ==
           0,
       "the binding can be changed to drop it");

    px_world_put(w);
    w = px_world_get();
    write_file("secrets/anthropic", "sk-ant-VALUE\n", 0644);
    ok(px_world_reload(err, sizeof(err)) == -1 && px_world_error_status() == 422 &&
           err_has("/secrets/anthropic: mode 0644 is looser than 0600; chmod 600 it") &&
           strstr(err, "VALUE") == NULL,
       "a bad secret-dir: the reload fails, naming the file, not the value");
    struct px_world *now = px_world_get();
    ok(now == w, "  and the old world stays");
    px_world_put(now);
    px_world_put(w);
    write_file("secrets/anthropic", "sk-ant-VALUE2\n", 0600);
    ok(px_world_reload(err, sizeof(err)) == 0, "fixed: the reload works");
    w = px_world_get();
    ok(px_secrets_get(w->secrets, "anthropic", &p, &len) && strcmp(p, "sk-ant-VALUE2") == 0,
       "  with the new value");
    px_world_put(w);
}

static void test_restart(void)
{
    ok(put("205", "{\"policy\":\"test\",\"secrets\":[\"anthropic\"]}") == 0, "put 205");
    px_world_shutdown();
    remove_file("secrets/anthropic");
    capture_start();
    err[0] = '\0';
    int rc = px_world_init(&cfg, &geo, err, sizeof(err));
    const char *log = capture_end();
    ok(rc == 0, "a start with a saved binding whose secret is gone works");
    ok(strstr(log, "sandbox 205: secrets: no secret 'anthropic' in secret-dir") != NULL,
       "  and warns");
    struct px_world *w = px_world_get();
    const struct px_sandbox *sb = px_world_by_id(w, "205");
    ok(sb != NULL && sb->n_secrets == 1 && sb->pb != NULL,
       "the binding is kept, and its policy works");
    px_world_put(w);

    /* Without secret-dir, no binding can name one. */
    px_world_shutdown();
    ok(config("listen 127.0.0.1:3128\npolicy-dir policies\ndefault-policy test\n"
              "state-dir state\n") == 0 &&
           px_world_init(&cfg, &geo, err, sizeof(err)) == 0,
       "init without secret-dir");
    w = px_world_get();
    ok(px_secrets_count(w->secrets) == 0, "an empty store");
    px_world_put(w);
    ok(put("206", "{\"policy\":\"test\",\"secrets\":[\"github\"]}") == -1 &&
           err_has("sandbox 206: secrets: no secret 'github': egressd has no secret-dir"),
       "a binding naming a secret: egressd has no secret-dir");
    write_file("secrets/bad", "", 0600);
    px_world_shutdown();
    ok(config(conf_with) == 0 && px_world_init(&cfg, &geo, err, sizeof(err)) == -1 &&
           err_has("/secrets/bad: empty; a secret needs a value"),
       "a bad secret-dir at start: init fails, naming the file");
}

int main(void)
{
    char cmd[600];

    px_log_init("test_world_secrets", false);
    px_metrics_init("test");
    setup();
    test_config();
    test_store();
    test_bindings();
    test_reload();
    test_restart();
    px_world_shutdown();
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        diag("could not remove %s", dir);
    return tap_done();
}
