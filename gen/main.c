/* dsagen: renders every configuration of Lua specs of a DSA layer into kernels, host glue and a
 * plan. Load (sandbox) -> validate -> derive -> render (pl.template) -> write (all or nothing). */
#include <dirent.h>
#include <errno.h>
#include <lauxlib.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "../kernels/dsa_abi.h"
#include "../runtime/dsa_digest.h"
#include "../runtime/dsa_plan.h"
#include "diag.h"
#include "output.h"
#include "sandbox.h"
#include "spec.h"
#include "trusted.h"

#define DSAGEN_VERSION "0.1.0"
#define MAX_TEMPLATES 64

static const char usage[] =
    "usage: dsagen SPEC.lua... -o OUTDIR [--templates DIR] [--depfile FILE --stamp FILE]\n"
    "       dsagen --list SPEC.lua...\n"
    "       dsagen --help | --version\n"
    "\n"
    "Renders every configuration of each spec into OUTDIR/<config>/, one file per template\n"
    "TEMPLATE.in of the templates folder. Nothing is written when any spec or template has an\n"
    "error; files whose content did not change are left untouched.\n"
    "\n"
    "  -o OUTDIR          where configurations are rendered (created when missing)\n"
    "  --list             print the configuration names of the specs, one a line, and exit\n"
    "  --templates DIR    templates folder (default: the first templates/ found in the dsagen\n"
    "                     binary's folder or one or two above it, else ./templates)\n"
    "  --depfile FILE     write a Makefile-style depfile naming every spec, import and template\n"
    "  --stamp FILE       the depfile's target, written (touched) after a successful run\n"
    "  --help             this text\n"
    "  --version          print \"dsagen " DSAGEN_VERSION "\" and exit\n"
    "\n"
    "Exit status: 0 on success, 1 on any error (messages on stderr as FILE:LINE: error: TEXT),\n"
    "2 on a usage error.\n";

typedef struct tmpl {
    char path[4096]; /* where it was read */
    char name[256];  /* as generated files name it: templates/config.h.in, whatever the folder */
    char out[256];  /* e.g. config.h */
    char *text;
    size_t len;
} tmpl;

typedef struct loaded {
    dsg_spec spec;
    dsg_sandbox *sb;
    char hash[17]; /* first 16 hex digits of the SHA-256 of the spec and its imports */
} loaded;

static int cmp_tmpl(const void *a, const void *b)
{
    return strcmp(((const tmpl *)a)->name, ((const tmpl *)b)->name);
}

static int load_templates(const char *dir, tmpl *t, int *n, dsg_diag *d)
{
    DIR *dp = opendir(dir);
    if (!dp) {
        dsg_error(d, NULL, 0, "cannot open templates folder '%s': %s", dir, strerror(errno));
        return -1;
    }
    struct dirent *e;
    *n = 0;
    while ((e = readdir(dp))) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".in") != 0 || e->d_name[0] == '.')
            continue;
        if (*n == MAX_TEMPLATES) {
            dsg_error(d, NULL, 0, "more than %d templates in '%s'", MAX_TEMPLATES, dir);
            break;
        }
        tmpl *x = &t[(*n)++];
        snprintf(x->path, sizeof x->path, "%s/%s", dir, e->d_name);
        snprintf(x->name, sizeof x->name, "templates/%s", e->d_name);
        snprintf(x->out, sizeof x->out, "%.*s", (int)(len - 3), e->d_name);
        x->text = dsg_read_file(x->path, (size_t)1 << 20, &x->len);
        if (!x->text)
            dsg_error(d, x->path, 0, "cannot read: %s", dsg_read_strerror(errno, (size_t)1 << 20));
    }
    closedir(dp);
    qsort(t, (size_t)*n, sizeof *t, cmp_tmpl);
    return d->errors ? -1 : 0;
}

static void hash_sources(loaded *l)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    for (size_t i = 0; i < dsg_sandbox_nsources(l->sb); i++) {
        const dsg_source *s = dsg_sandbox_source(l->sb, i);
        EVP_DigestUpdate(ctx, s->text, s->len);
    }
    EVP_DigestFinal_ex(ctx, md, &mdlen);
    EVP_MD_CTX_free(ctx);
    dsa_hex(md, 8, l->hash);
}

/* The spec's watchdog: the sandbox checks its clock between Lua instructions and at calls, and the
 * line map every 10,000 of its instructions, but a single C call can outlast any of those checks
 * (Lua's parser over a 1 MiB chain of `or`, table.sort over long equal strings, the line map's
 * lexer on one huge numeral), and a field's line lookup has no check of its own: past the limit
 * and a grace for those checks to report first, SIGALRM ends the process with the spec's error.
 * Nothing has been written then (output is committed after every spec has loaded), so exiting is
 * safe. */
#define WATCHDOG_GRACE 5 /* seconds */
static char watchdog_msg[1024];
static size_t watchdog_len;

static void watchdog_fire(int sig)
{
    (void)sig;
    ssize_t w = write(STDERR_FILENO, watchdog_msg, watchdog_len);
    (void)w;
    _exit(1);
}

static void watchdog_arm(const char *path)
{
    FILE *f = fmemopen(watchdog_msg, sizeof watchdog_msg - 1, "w");
    if (f) {
        setvbuf(f, NULL, _IONBF, 0);
        dsg_fputs_escaped(path, strlen(path), f);
        fprintf(f, ": error: spec exceeds the time limit of %d seconds (stopped by the watchdog: inside one "
                   "call, such as the parser's or a library function's)\n", DSG_SPEC_TIME_LIMIT);
        long at = ftell(f);
        fclose(f);
        watchdog_len = at > 0 ? (size_t)at : 0;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = watchdog_fire;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    sigset_t alarm;
    sigemptyset(&alarm);
    sigaddset(&alarm, SIGALRM);
    sigprocmask(SIG_UNBLOCK, &alarm, NULL); /* a parent that blocked it would take the watchdog away */
    const struct itimerval it = {{0, 0}, {DSG_SPEC_TIME_LIMIT + WATCHDOG_GRACE, 0}};
    setitimer(ITIMER_REAL, &it, NULL);
}

static void watchdog_disarm(void)
{
    const struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
}

static int load_spec_timed(const char *path, loaded *l, dsg_trusted *t, dsg_diag *d)
{
    memset(&l->spec, 0, sizeof l->spec);
    l->spec.path = path;
    l->sb = dsg_sandbox_new();
    if (!l->sb) {
        dsg_error(d, NULL, 0, "out of memory");
        return -1;
    }
    if (dsg_sandbox_run(l->sb, path, d) != 0)
        return -1;
    for (size_t i = 0; i < dsg_sandbox_nsources(l->sb); i++) {
        const dsg_source *s = dsg_sandbox_source(l->sb, i);
        if (dsg_trusted_linemap(t, s->path, s->text, s->len, dsg_sandbox_started(l->sb), d) != 0)
            return -1;
    }
    if (dsg_spec_validate(&l->spec, l->sb, t, d) != 0)
        return -1;
    hash_sources(l);
    return 0;
}

static int load_spec(const char *path, loaded *l, dsg_trusted *t, dsg_diag *d)
{
    watchdog_arm(path);
    const int rc = load_spec_timed(path, l, t, d);
    watchdog_disarm();
    return rc;
}

/* ---- the values a template sees ---- */

static void set_int(lua_State *L, const char *k, long long v)
{
    lua_pushinteger(L, (lua_Integer)v);
    lua_setfield(L, -2, k);
}

static void set_num(lua_State *L, const char *k, double v)
{
    lua_pushnumber(L, v);
    lua_setfield(L, -2, k);
}

static void set_str(lua_State *L, const char *k, const char *v)
{
    lua_pushstring(L, v);
    lua_setfield(L, -2, k);
}

static void set_bool(lua_State *L, const char *k, int v)
{
    lua_pushboolean(L, v);
    lua_setfield(L, -2, k);
}

static void push_env(lua_State *L, const loaded *l, const dsg_config *c, const char *tname)
{
    const dsg_geometry *g = &l->spec.g;
    dsg_derived dv;
    dsg_derive(g, c, &dv);
    lua_newtable(L);
    set_str(L, "name", c->name);
    set_str(L, "symbol", c->symbol);
    set_str(L, "model", l->spec.model);
    set_str(L, "spec_path", l->spec.path);
    set_str(L, "template", tname);

    lua_newtable(L);
    set_int(L, "heads", g->heads);
    set_int(L, "q_lora_rank", g->q_lora_rank);
    set_int(L, "kv_lora_rank", g->kv_lora_rank);
    set_int(L, "qk_nope_dim", g->qk_nope_dim);
    set_int(L, "qk_rope_dim", g->qk_rope_dim);
    set_int(L, "v_head_dim", g->v_head_dim);
    set_num(L, "rms_norm_eps", g->rms_norm_eps);
    set_int(L, "max_positions", g->max_positions);
    set_int(L, "block_size", g->block_size);
    set_num(L, "rope_theta", g->rope_theta);
    set_str(L, "rope_style", dsg_rope_style_names[g->rope_style]);
    set_bool(L, "yarn", g->has_yarn);
    set_num(L, "yarn_factor", g->has_yarn ? g->yarn_factor : 1.0);
    set_int(L, "yarn_original_max_positions", g->has_yarn ? g->yarn_original_max_positions : g->max_positions);
    set_num(L, "yarn_beta_fast", g->yarn_beta_fast);
    set_num(L, "yarn_beta_slow", g->yarn_beta_slow);
    set_num(L, "yarn_mscale", g->yarn_mscale);
    set_num(L, "yarn_mscale_all_dim", g->yarn_mscale_all_dim);
    set_bool(L, "softmax_scale_given", g->has_softmax_scale);
    set_int(L, "idx_heads", g->idx_heads);
    set_int(L, "idx_head_dim", g->idx_head_dim);
    set_int(L, "idx_topk", g->idx_topk);
    set_str(L, "idx_rope_style", dsg_rope_style_names[g->idx_rope_style]);
    set_bool(L, "idx_rope_first", g->idx_rope_first);
    set_bool(L, "idx_hadamard", g->idx_hadamard);
    set_num(L, "idx_norm_eps", g->idx_norm_eps);
    lua_setfield(L, -2, "g");

    lua_newtable(L);
    set_int(L, "tp", c->tp);
    set_int(L, "dcp", c->dcp);
    set_int(L, "interleave", c->interleave);
    set_str(L, "cache_dtype", dsg_cache_dtype_names[c->cache_dtype]);
    set_bool(L, "fp8_scale_pow2", c->fp8_scale_pow2);
    lua_newtable(L);
    for (int i = 0; i < c->ntargets; i++) {
        lua_pushstring(L, dsg_target_names[c->targets[i]]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "targets");
    lua_setfield(L, -2, "c");

    lua_newtable(L);
    set_int(L, "kernel_abi", DSA_ABI_VERSION); /* the parameter blocks' version, from their one header */
    set_int(L, "plan_abi", DSA_PLAN_ABI);      /* plan.txt's format, from the header libdsa reads it with */
    set_int(L, "heads_local", dv.heads_local);
    set_int(L, "heads_gathered", dv.heads_gathered);
    set_int(L, "attend_heads_per_cta", dv.attend_heads_per_cta);
    set_int(L, "attend_producers", dv.attend_producers);
    set_int(L, "attend_cluster", dv.attend_cluster);
    set_int(L, "qk_head_dim", dv.qk_head_dim);
    set_int(L, "kv_dim", dv.kv_dim);
    set_num(L, "softmax_scale", dv.softmax_scale);
    set_num(L, "rope_mscale", dv.rope_mscale);
    set_int(L, "cache_bytes_per_token", dv.cache_bytes_per_token);
    set_int(L, "cache_latent_offset", dv.cache_latent_offset);
    set_int(L, "cache_latent_bytes", dv.cache_latent_bytes);
    set_int(L, "cache_scale_offset", dv.cache_scale_offset);
    set_int(L, "cache_scale_bytes", dv.cache_scale_bytes);
    set_int(L, "cache_scale_group", dv.cache_scale_group);
    set_int(L, "cache_rope_offset", dv.cache_rope_offset);
    set_int(L, "cache_rope_bytes", dv.cache_rope_bytes);
    set_int(L, "idx_bytes_per_token", dv.idx_bytes_per_token);
    set_int(L, "idx_page_bytes", dv.idx_page_bytes);
    set_int(L, "idx_scale_offset_in_page", dv.idx_scale_offset_in_page);
    set_int(L, "ws_q_packed", dv.ws_q_packed);
    set_int(L, "ws_q_gathered", dv.ws_q_gathered);
    set_int(L, "ws_partial_out", dv.ws_partial_out);
    set_int(L, "ws_partial_lse", dv.ws_partial_lse);
    set_int(L, "gather_send", dv.gather_send);
    set_int(L, "gather_recv", dv.gather_recv);
    set_int(L, "exchange_send", dv.exchange_send);
    set_int(L, "exchange_recv", dv.exchange_recv);
    set_int(L, "exchange_row", dv.exchange_row);
    set_int(L, "ws_exchange", dv.ws_exchange);
    set_int(L, "ws_attend_row", dv.ws_attend_row);
    set_int(L, "attend_row_keys", dv.attend_row_keys);
    set_int(L, "attend_row_bytes", dv.attend_row_bytes);
    set_int(L, "attend_row_flops", dv.attend_row_flops);
    set_int(L, "attend_split_keys", dv.attend_split_keys);
    set_int(L, "attend_ws_threads", dv.attend_ws_threads);
    set_int(L, "topk_row_bytes", dv.topk_row_bytes);
    set_int(L, "q_lat_row", dv.q_lat_row);
    set_int(L, "idx_q_row", dv.idx_q_row);
    set_int(L, "q_pe_row", dv.q_pe_row);
    set_int(L, "out_row", dv.out_row);
    set_int(L, "lse_row", dv.lse_row);
    set_int(L, "prologue_threads", dv.prologue_threads);
    set_int(L, "rope_threads", dv.rope_threads);
    set_int(L, "pack_threads", dv.pack_threads);
    set_int(L, "merge_threads", dv.merge_threads);
    set_int(L, "split_merge_few", dv.split_merge_few);
    set_int(L, "pack_ctas_per_token", dv.pack_ctas_per_token);
    set_int(L, "attend_ctas_per_token", dv.attend_ctas_per_token);
    set_int(L, "attend_max_splits", dv.attend_max_splits);
    set_int(L, "rope_entries", dv.rope_entries);
    set_int(L, "idx_max_local", dv.idx_max_local);
    set_int(L, "ws_idx_q8", dv.ws_idx_q8);
    set_int(L, "ws_idx_wq", dv.ws_idx_wq);
    set_int(L, "ws_idx_keys", dv.ws_idx_keys);
    set_int(L, "ws_idx_cand", dv.ws_idx_cand);
    set_int(L, "ws_idx_merged", dv.ws_idx_merged);
    set_int(L, "ws_index_row", dv.ws_index_row);
    set_int(L, "index_q_threads", dv.index_q_threads);
    set_int(L, "index_q_ctas_per_token", dv.index_q_ctas_per_token);
    set_int(L, "index_score_threads", dv.index_score_threads);
    set_int(L, "index_score_keys_per_cta", dv.index_score_keys_per_cta);
    set_int(L, "index_topk_threads", dv.index_topk_threads);
    set_int(L, "index_merge_smem", dv.index_merge_smem);
    set_int(L, "index_score_few_rows", dv.index_score_few_rows);
    set_int(L, "index_score_min_ctas", dv.index_score_min_ctas);
    set_int(L, "index_score_group_rows", dv.index_score_group_rows);
    set_int(L, "index_score_stages", dv.index_score_stages);
    set_int(L, "index_topk_split_threads", dv.index_topk_split_threads);
    set_int(L, "index_topk_radix_bits", dv.index_topk_radix_bits);
    set_int(L, "index_topk_split_keys", dv.index_topk_split_keys);
    set_int(L, "index_topk_split_max", dv.index_topk_split_max);
    set_int(L, "index_topk_split_min", dv.index_topk_split_min);
    set_int(L, "index_topk_split_min_keys", dv.index_topk_split_min_keys);
    set_int(L, "index_topk_split_cands", dv.index_topk_split_cands);
    set_int(L, "index_topk_bit_keys", dv.index_topk_bit_keys);
    set_int(L, "index_score_bins", dv.index_score_bins);
    set_int(L, "ws_idx_topk_state", dv.ws_idx_topk_state);
    lua_newtable(L);
    for (int i = 0; i < g->qk_rope_dim / 2; i++) {
        lua_pushnumber(L, dv.rope_freq[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "rope_freq");
    /* kernel entry names: the instantiations define them, the plan names them */
    lua_newtable(L);
    static const char *const entries[] = {"prologue",    "rope_table",  "pack_q",     "attend",     "merge",
                                          "split_merge", "split_merge_few", "attend_smem", "attend_threads", "attend_cluster_merge", "index_q",     "index_score", "index_score_few", "index_score_group", "index_score_group_smem", "index_topk",
                                          "index_topk_split", "index_merge", "barrier"};
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        char e[192];
        snprintf(e, sizeof e, "dsa_%s_%s", entries[i], c->symbol);
        set_str(L, entries[i], e);
    }
    lua_setfield(L, -2, "entry");
    lua_setfield(L, -2, "d");
}

/* Comment syntax of a generated file, by its extension: open, continuation, close. */
static void comment_style(const char *out, const char **open, const char **cont, const char **close)
{
    const char *ext = strrchr(out, '.');
    *open = "//", *cont = "//", *close = "";
    if (ext && strcmp(ext, ".md") == 0)
        *open = "<!--", *cont = "    ", *close = " -->";
    else if (ext && (strcmp(ext, ".ninja") == 0 || strcmp(ext, ".txt") == 0))
        *open = "#", *cont = "#";
}

/* A formatted string in malloc'd memory (no fixed buffer: paths have no useful bound), or NULL. */
__attribute__((format(printf, 1, 2))) static char *format(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    return n < 0 ? NULL : s;
}

static char *provenance(const loaded *l, const dsg_config *c, const tmpl *t)
{
    const char *open, *cont, *close;
    comment_style(t->out, &open, &cont, &close);
    return format("%s Generated by dsagen " DSAGEN_VERSION " from %s (sha256 %s) through %s.\n"
                  "%s Configuration %s. Do not edit: change the spec or the template, then run ninja.%s\n",
                  open, l->spec.path, l->hash, t->name, cont, c->name, close);
}

/* head followed by body; frees both (either may be NULL: then NULL). */
static char *concat_owned(char *head, char *body)
{
    char *all = NULL;
    if (head && body) {
        size_t hl = strlen(head), bl = strlen(body);
        all = malloc(hl + bl + 1);
        if (all) {
            memcpy(all, head, hl);
            memcpy(all + hl, body, bl + 1);
        }
    }
    free(head);
    free(body);
    return all;
}

/* Stages head + body at path (all three owned), reporting when out of memory. */
static int stage(dsg_outset *o, char *path, char *head, char *body, dsg_diag *d)
{
    char *all = concat_owned(head, body);
    int rc = all && path && dsg_out_add(o, path, all, strlen(all)) == 0 ? 0 : -1;
    if (rc != 0) {
        free(all);
        dsg_error(d, NULL, 0, "out of memory");
    }
    free(path);
    return rc;
}

/* Files rendered once per run from templates/top/, with the list of every configuration. */
static int render_top(const loaded *ls, int ns, const tmpl *t, int nt, const char *outdir, dsg_trusted *tr,
                      dsg_outset *o, dsg_diag *d)
{
    lua_State *L = dsg_trusted_state(tr);
    char *from = format("%s", "");
    for (int i = 0; i < ns && from; i++) {
        char *more = format("%s%s%s (sha256 %s)", from, i ? ", " : "", ls[i].spec.path, ls[i].hash);
        free(from);
        from = more;
    }
    if (!from) {
        dsg_error(d, NULL, 0, "out of memory");
        return -1;
    }
    for (int k = 0; k < nt; k++) {
        lua_newtable(L);
        lua_newtable(L);
        int n = 0;
        for (int i = 0; i < ns; i++)
            for (int j = 0; j < ls[i].spec.nconfigs; j++) {
                lua_newtable(L);
                set_str(L, "name", ls[i].spec.configs[j].name);
                set_str(L, "symbol", ls[i].spec.configs[j].symbol);
                set_str(L, "spec_path", ls[i].spec.path);
                lua_rawseti(L, -2, ++n);
            }
        lua_setfield(L, -2, "configs");
        char *body = dsg_trusted_render(tr, t[k].name, t[k].text, t[k].len, d);
        if (!body) {
            free(from);
            return -1;
        }
        const char *open, *cont, *close;
        comment_style(t[k].out, &open, &cont, &close);
        char *head = format("%s Generated by dsagen " DSAGEN_VERSION " from %s\n%s through %s. Do not edit: change "
                            "the specs or the template, then run ninja.%s\n",
                            open, from, cont, t[k].name, close);
        if (stage(o, format("%s/%s", outdir, t[k].out), head, body, d) != 0) {
            free(from);
            return -1;
        }
    }
    free(from);
    return 0;
}

#define PLAN_TXT "plan.txt"

/* Every template of a configuration, plan.txt's last: it records the SHA-256 of each file rendered
 * before it (the table sha256, by file name), so that libdsa refuses a folder whose sources were
 * edited after generation or mix two generations. */
static int render_config(const loaded *l, const dsg_config *c, const tmpl *t, int nt, const char *outdir,
                         dsg_trusted *tr, dsg_outset *o, dsg_diag *d)
{
    lua_State *L = dsg_trusted_state(tr);
    lua_newtable(L); /* sha256: file name -> hex, filled as files are rendered */
    const int sums = lua_gettop(L);
    int rc = 0;
    for (int pass = 0; pass < 2 && rc == 0; pass++)
        for (int i = 0; i < nt && rc == 0; i++) {
            if ((strcmp(t[i].out, PLAN_TXT) == 0) != (pass == 1))
                continue;
            push_env(L, l, c, t[i].name);
            if (pass == 1) {
                lua_pushvalue(L, sums);
                lua_setfield(L, -2, "sha256");
            }
            char *body = dsg_trusted_render(tr, t[i].name, t[i].text, t[i].len, d);
            char *all = body ? concat_owned(provenance(l, c, &t[i]), body) : NULL;
            if (!all) {
                if (body)
                    dsg_error(d, NULL, 0, "out of memory");
                rc = -1;
                break;
            }
            if (pass == 1) { /* the plan's own seal covers it ending in a newline */
                const size_t n = strlen(all);
                char *text = format("%s%s", all, n && all[n - 1] != '\n' ? "\n" : "");
                free(all);
                if (!(all = text)) {
                    dsg_error(d, NULL, 0, "out of memory");
                    rc = -1;
                    break;
                }
            }
            char hex[65];
            if (dsa_sha256_hex(all, strlen(all), hex) != 0) {
                free(all);
                dsg_error(d, NULL, 0, "%s: libcrypto could not compute a SHA-256", t[i].out);
                rc = -1;
                break;
            }
            if (pass == 0) { /* a source the plan records */
                lua_pushstring(L, hex);
                lua_setfield(L, sums, t[i].out);
            } else { /* the seal, its last line: libdsa refuses a plan edited after */
                char *sealed = format("%splan-sha256 %s\n", all, hex);
                free(all);
                if (!(all = sealed)) {
                    dsg_error(d, NULL, 0, "out of memory");
                    rc = -1;
                    break;
                }
            }
            char *path = format("%s/%s/%s", outdir, c->name, t[i].out);
            if (!path || dsg_out_add(o, path, all, strlen(all)) != 0) {
                free(all);
                dsg_error(d, NULL, 0, "out of memory");
                rc = -1;
            }
            free(path);
        }
    lua_settop(L, sums - 1);
    return rc;
}

/* The templates folder beside the binary's: build/dsagen -> templates/. */
static void default_templates(char *buf, size_t n)
{
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) {
        snprintf(buf, n, "templates");
        return;
    }
    exe[len] = '\0';
    /* build/dsagen and build/asan/dsagen both find the repository's templates/ above them */
    for (int up = 0; up < 3; up++) {
        char *slash = strrchr(exe, '/');
        if (!slash)
            break;
        *slash = '\0';
        snprintf(buf, n, "%s/templates", exe);
        if (access(buf, F_OK) == 0)
            return;
    }
    snprintf(buf, n, "templates");
}

/* A path as ninja's depfile parser reads it back: a space as "\ " (backslashes before it doubled),
 * '#' as "\#", '$' as "$$". Characters the parser has no escape for (it ends a name at them)
 * make it NULL, with *bad set to the character. */
static char *dep_escape(const char *path, char *bad)
{
    static const char plain[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+,/_:.~()}{%=@[]!-";
    size_t n = strlen(path);
    char *buf = malloc(3 * n + 1), *o = buf;
    *bad = 0;
    if (!buf)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)path[i];
        if (c == '\\') {
            size_t k = strspn(path + i, "\\");
            if (path[i + k] == '\0') { /* "a\ " would read as an escaped space */
                *bad = '\\';
                break;
            }
            size_t m = path[i + k] == ' ' ? 2 * k : k;
            memset(o, '\\', m);
            o += m;
            i += k - 1;
        } else if (c == ' ' || c == '#') {
            *o++ = '\\';
            *o++ = (char)c;
        } else if (c == '$') {
            *o++ = '$';
            *o++ = '$';
        } else if ((c == ':' && i + 1 == n) || !(c >= 0x80 || (c && strchr(plain, c)))) {
            *bad = (char)c; /* a trailing ':' would end a target */
            break;
        } else {
            *o++ = (char)c;
        }
    }
    if (*bad) {
        free(buf);
        return NULL;
    }
    *o = '\0';
    return buf;
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether folder dir holds a file this generator wrote (its provenance line opens the file). */
static int holds_generated(const char *dir)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return 0;
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(dp))) {
        if (e->d_name[0] == '.')
            continue;
        char *path = format("%s/%s", dir, e->d_name);
        size_t len;
        char *text = path ? dsg_read_file(path, (size_t)1 << 20, &len) : NULL;
        found = text && strstr(text, " Generated by dsagen ") && strstr(text, " Generated by dsagen ") - text < 16;
        free(text);
        free(path);
    }
    closedir(dp);
    return found;
}

/* A configuration removed from a spec leaves its folder in OUTDIR, which the build no longer
 * uses: each such folder (one holding generated files, named like no configuration of this
 * run) is reported, in name order, and left alone. */
static void warn_stale(const char *outdir, const loaded *ls, int ns)
{
    DIR *dp = opendir(outdir);
    if (!dp)
        return;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(dp))) {
        if (e->d_name[0] == '.')
            continue;
        int known = 0;
        for (int i = 0; i < ns && !known; i++)
            for (int k = 0; k < ls[i].spec.nconfigs && !known; k++)
                known = strcmp(e->d_name, ls[i].spec.configs[k].name) == 0;
        if (known)
            continue;
        if (n == cap) {
            char **more = realloc(names, (cap = cap ? 2 * cap : 16) * sizeof *names);
            if (!more)
                break;
            names = more;
        }
        if (!(names[n] = strdup(e->d_name)))
            break;
        n++;
    }
    closedir(dp);
    qsort(names, n, sizeof *names, cmp_cstr);
    for (size_t i = 0; i < n; i++) {
        char *dir = format("%s/%s", outdir, names[i]);
        struct stat st;
        if (dir && stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && holds_generated(dir)) {
            fputs("dsagen: warning: ", stderr);
            dsg_fputs_escaped(dir, strlen(dir), stderr);
            fputs(" holds generated files of a configuration these specs do not generate (removed from a "
                  "spec?); it is left in place\n", stderr);
        }
        free(dir);
        free(names[i]);
    }
    free(names);
}

/* Stages the depfile and the stamp with the generated files: all are written, or none. */
static int stage_depfile(dsg_outset *o, const char *depfile, const char *stamp, loaded *specs, int ns,
                         const tmpl *t, int nt, const tmpl *top, int ntop, const char *templates_dir, dsg_diag *d)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf) {
        dsg_error(d, NULL, 0, "out of memory");
        return -1;
    }
#define APPEND(...)                                                                                          \
    do {                                                                                                     \
        int k_ = snprintf(buf + len, cap - len, __VA_ARGS__);                                                \
        while (k_ >= 0 && (size_t)k_ >= cap - len) {                                                         \
            char *nb_ = realloc(buf, cap *= 2);                                                              \
            if (!nb_) {                                                                                      \
                free(buf);                                                                                   \
                dsg_error(d, NULL, 0, "out of memory");                                                      \
                return -1;                                                                                   \
            }                                                                                                \
            buf = nb_;                                                                                       \
            k_ = snprintf(buf + len, cap - len, __VA_ARGS__);                                                \
        }                                                                                                    \
        len += (size_t)k_;                                                                                   \
    } while (0)
#define APPEND_PATH(fmt, p)                                                                                  \
    do {                                                                                                     \
        char bad_;                                                                                           \
        char *e_ = dep_escape(p, &bad_);                                                                     \
        if (!e_) {                                                                                           \
            free(buf);                                                                                       \
            if (bad_)                                                                                        \
                dsg_error(d, NULL, 0, "cannot name '%s' in the depfile: ninja's depfile syntax has no escape " \
                                      "for its character '%c'", p, bad_);                                    \
            else                                                                                             \
                dsg_error(d, NULL, 0, "out of memory");                                                      \
            return -1;                                                                                       \
        }                                                                                                    \
        APPEND(fmt, e_);                                                                                     \
        free(e_);                                                                                            \
    } while (0)
    APPEND_PATH("%s:", stamp);
    for (int i = 0; i < ns; i++)
        for (size_t k = 0; k < dsg_sandbox_nsources(specs[i].sb); k++)
            APPEND_PATH(" \\\n  %s", dsg_sandbox_source(specs[i].sb, k)->path);
    for (int i = 0; i < nt; i++)
        APPEND_PATH(" \\\n  %s", t[i].path);
    for (int i = 0; i < ntop; i++)
        APPEND_PATH(" \\\n  %s", top[i].path);
    APPEND_PATH(" \\\n  %s", templates_dir); /* mtimes change when templates come or go */
    APPEND_PATH(" \\\n  %s/top", templates_dir);
    APPEND("\n");
#undef APPEND_PATH
#undef APPEND
    if (dsg_out_add(o, depfile, buf, len) != 0) {
        free(buf);
        dsg_error(d, NULL, 0, "out of memory");
        return -1;
    }
    char *stampdata = strdup("dsagen stamp\n");
    /* Written on every run, last: newer than every file read, even one the depfile names for the
     * first time (ninja compares the stamp with it, restat or not). */
    if (!stampdata || dsg_out_add_touch(o, stamp, stampdata, strlen(stampdata)) != 0) {
        free(stampdata);
        dsg_error(d, NULL, 0, "out of memory");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *outdir = NULL, *depfile = NULL, *stamp = NULL;
    char templates[4096] = "";
    const char *specs[DSG_MAX_CONFIGS];
    int nspecs = 0, list = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            puts("dsagen " DSAGEN_VERSION);
            return 0;
        } else if (strcmp(a, "--list") == 0) {
            list = 1;
        } else if ((strcmp(a, "-o") == 0 || strcmp(a, "--templates") == 0 || strcmp(a, "--depfile") == 0 ||
                    strcmp(a, "--stamp") == 0)) {
            if (i + 1 >= argc) {
                fprintf(stderr, "dsagen: error: %s needs a value\n%s", a, usage);
                return 2;
            }
            const char *v = argv[++i];
            if (!v[0]) { /* "" would be the root: "-o $UNSET_VAR" must not write into / */
                fprintf(stderr, "dsagen: error: %s: an empty path\n%s", a, usage);
                return 2;
            }
            if (a[1] == 'o')
                outdir = v;
            else if (a[2] == 't' && a[3] == 'e') {
                if (snprintf(templates, sizeof templates, "%s", v) >= (int)sizeof templates) {
                    fprintf(stderr, "dsagen: error: --templates: path too long\n");
                    return 2;
                }
            } else if (a[2] == 'd')
                depfile = v;
            else
                stamp = v;
        } else if (a[0] == '-') {
            fprintf(stderr, "dsagen: error: unknown option '%s'\n%s", a, usage);
            return 2;
        } else if (nspecs == DSG_MAX_CONFIGS) {
            fprintf(stderr, "dsagen: error: more than %d specs\n", DSG_MAX_CONFIGS);
            return 2;
        } else {
            specs[nspecs++] = a;
        }
    }
    if (nspecs == 0 || (!list && !outdir) || (!depfile != !stamp)) {
        fprintf(stderr, "dsagen: error: %s\n%s",
                nspecs == 0 ? "no spec given" : !list && !outdir ? "no output folder given (-o OUTDIR)"
                                                                  : "--depfile and --stamp go together",
                usage);
        return 2;
    }
    if (!templates[0])
        default_templates(templates, sizeof templates);

    dsg_diag d = {0};
    /* Spec paths are quoted in generated files (C, Markdown and ninja comments): one that would
     * end a comment or a line there is refused, rather than escaped into something unreadable. */
    for (int i = 0; i < nspecs; i++) {
        const char *why = NULL;
        for (const unsigned char *p = (const unsigned char *)specs[i]; *p && !why; p++)
            if (*p < 0x20 || *p == 0x7f)
                why = "a control character";
        if (!why && strstr(specs[i], "*/"))
            why = "'*/'";
        if (!why && strstr(specs[i], "-->"))
            why = "'-->'";
        if (why)
            dsg_error(&d, NULL, 0, "spec path '%s' contains %s, which would end the comment that quotes it in "
                                   "generated files; rename the spec or its folder", specs[i], why);
    }
    if (d.errors)
        return 1;
    dsg_trusted *tr = dsg_trusted_new(&d);
    loaded *ls = calloc((size_t)nspecs, sizeof *ls);
    static tmpl t[MAX_TEMPLATES], top[MAX_TEMPLATES];
    int nt = 0, ntop = 0;
    dsg_outset o = {0};
    int rc = 1;
    if (!tr || !ls)
        goto done;
    for (int i = 0; i < nspecs && !dsg_too_many(&d); i++)
        load_spec(specs[i], &ls[i], tr, &d);
    if (d.errors)
        goto done;
    /* configuration names are folder names, and their symbols C identifiers (glm5.2 and glm5_2
     * are both glm5_2): both unique across all specs of one run, reported at the later one */
    for (int i = 0; i < nspecs; i++)
        for (int k = 0; k < ls[i].spec.nconfigs; k++) {
            const dsg_config *ci = &ls[i].spec.configs[k];
            int found = 0;
            for (int j = 0; j <= i && !found; j++)
                for (int m = 0; m < (j < i ? ls[j].spec.nconfigs : k) && !found; m++) {
                    const dsg_config *cj = &ls[j].spec.configs[m];
                    if (strcmp(ci->name, cj->name) == 0) {
                        dsg_error(&d, ls[i].spec.path, ci->line, "configs[%d]: configuration '%s' is also generated by %s:%d",
                                  k + 1, ci->name, ls[j].spec.path, cj->line);
                        found = 1;
                    } else if (strcmp(ci->symbol, cj->symbol) == 0) {
                        dsg_error(&d, ls[i].spec.path, ci->line,
                                  "configs[%d]: configuration '%s' has the same C symbol (%s) as '%s' of %s:%d; model "
                                  "names must differ in more than '.', '-' and '_'",
                                  k + 1, ci->name, ci->symbol, cj->name, ls[j].spec.path, cj->line);
                        found = 1;
                    }
                }
        }
    if (d.errors)
        goto done;
    if (list) {
        for (int i = 0; i < nspecs; i++)
            for (int k = 0; k < ls[i].spec.nconfigs; k++)
                printf("%s\n", ls[i].spec.configs[k].name);
        rc = 0;
        goto done;
    }
    if (load_templates(templates, t, &nt, &d) != 0)
        goto done;
    char topdir[4200];
    snprintf(topdir, sizeof topdir, "%s/top", templates);
    if (access(topdir, F_OK) == 0 && load_templates(topdir, top, &ntop, &d) != 0)
        goto done;
    for (int i = 0; i < ntop; i++) {
        char name[300];
        snprintf(name, sizeof name, "templates/top/%s", top[i].name + strlen("templates/"));
        snprintf(top[i].name, sizeof top[i].name, "%s", name);
    }
    if (render_top(ls, nspecs, top, ntop, outdir, tr, &o, &d) != 0)
        goto done;
    for (int i = 0; i < nspecs && !d.errors; i++)
        for (int k = 0; k < ls[i].spec.nconfigs && !d.errors; k++)
            render_config(&ls[i], &ls[i].spec.configs[k], t, nt, outdir, tr, &o, &d);
    if (d.errors)
        goto done;
    if (depfile && stage_depfile(&o, depfile, stamp, ls, nspecs, t, nt, top, ntop, templates, &d) != 0)
        goto done;
    int written = 0;
    if (dsg_out_commit(&o, &written, &d) != 0)
        goto done;
    warn_stale(outdir, ls, nspecs);
    rc = 0;
done:
    if (d.errors > DSG_MAX_ERRORS)
        fprintf(stderr, "dsagen: %d errors in all\n", d.errors);
    dsg_out_free(&o);
    for (int i = 0; i < nt; i++)
        free(t[i].text);
    for (int i = 0; i < ntop; i++)
        free(top[i].text);
    for (int i = 0; ls && i < nspecs; i++)
        dsg_sandbox_free(ls[i].sb);
    free(ls);
    dsg_trusted_free(tr);
    return rc;
}
