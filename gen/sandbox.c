/* The spec sandbox: a spec is data, so it runs with math, string and table only, bounded. */
#include "sandbox.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct dsg_sandbox {
    lua_State *L;
    size_t used, limit; /* Lua's allocations, plus the text of the files read (held in C) */
    long instructions;
    double start;       /* dsg_clock_now() when the spec started */
    int last_line;   /* the line the spec's code last ran, in sources[last_source] (-1: none yet) */
    long last_source;
    char *parse_error; /* the message of the last file that did not parse (Lua's parser wrote it) */
    int error_at_frame; /* the error's "file:line: " prefix named a running frame where it was raised */
    int import_depth, nimports;
    dsg_source *sources;
    size_t nsources, capsources;
};

static const char ENV_KEY[] = "dsagen.env";   /* the environment every file's own is copied from */
static const char ENVS_KEY[] = "dsagen.envs"; /* the files' environments (weak keys), for is_env */
static const char ORIGIN_KEY[] = "dsagen.origin";
static const char SNAPSHOT_KEY[] = "dsagen.snapshots";

/* The hook runs every HOOK_COUNT instructions (it counts them) and on every call; both check the
 * clock (CLOCK_MONOTONIC: read without a system call). */
#define HOOK_COUNT 1000

double dsg_clock_now(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void *dsg_counted_realloc(size_t *used, size_t limit, void *ptr, size_t osize, size_t nsize)
{
    const size_t old = ptr ? osize : 0;
    if (nsize == 0) {
        free(ptr);
        *used -= old;
        return NULL;
    }
    if (nsize > old && *used - old + nsize > limit)
        return NULL;
    void *p = realloc(ptr, nsize);
    if (p)
        *used = *used - old + nsize;
    return p;
}

static void *limited_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    dsg_sandbox *sb = ud;
    return dsg_counted_realloc(&sb->used, sb->limit, ptr, osize, nsize);
}

static void hook(lua_State *L, lua_Debug *ar)
{
    dsg_sandbox *sb;
    lua_getallocf(L, (void **)&sb);
    if (ar->event == LUA_HOOKLINE) {
        if (lua_getinfo(L, "S", ar) && ar->source[0] == '@') {
            sb->last_line = ar->currentline;
            /* which file: most lines run in the file of the line before */
            if (sb->last_source < 0 || strcmp(sb->sources[sb->last_source].path, ar->source + 1) != 0) {
                sb->last_source = -1;
                for (size_t i = 0; i < sb->nsources; i++)
                    if (!strcmp(sb->sources[i].path, ar->source + 1))
                        sb->last_source = (long)i;
            }
        }
        return;
    }
    /* The instruction count does not bound time: one instruction can call a C function that does
     * much work (table.sort of half a million entries takes a quarter of a second), so the clock is
     * checked on every call too, before the function runs, and every HOOK_COUNT instructions. */
    int over_count = 0;
    if (ar->event == LUA_HOOKCOUNT) {
        sb->instructions += HOOK_COUNT;
        over_count = sb->instructions > DSG_SPEC_INSTRUCTION_LIMIT;
    }
    if (over_count || dsg_clock_now() - sb->start > DSG_SPEC_TIME_LIMIT) {
        /* the innermost spec code running: a call event is in the function called, maybe C */
        const char *file = "?";
        int line = 0;
        lua_Debug at;
        for (int level = 0; lua_getstack(L, level, &at); level++) {
            if (lua_getinfo(L, "Sl", &at) && at.source[0] == '@') {
                file = at.source + 1;
                line = at.currentline;
                break;
            }
        }
        if (over_count)
            lua_pushfstring(L, "%s:%d: spec exceeds the limit of %d million instructions (an endless loop?)", file,
                            line, (int)(DSG_SPEC_INSTRUCTION_LIMIT / 1000000));
        else
            lua_pushfstring(L, "%s:%d: spec exceeds the time limit of %d seconds (an endless loop?)", file, line,
                            DSG_SPEC_TIME_LIMIT);
        lua_error(L);
    }
}

/* Opens only regular files, and never in a way that blocks (a FIFO opened for reading would wait
 * for a writer): O_NONBLOCK, then fstat. flags adds O_NOFOLLOW for imports. */
static char *read_file(const char *path, size_t limit, size_t *len, int flags)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | flags);
    if (fd < 0)
        return NULL;
    struct stat st;
    int err = 0;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    if (fstat(fd, &st) != 0)
        err = errno;
    else if (!S_ISREG(st.st_mode))
        err = EINVAL;
    else if ((uintmax_t)st.st_size > limit)
        err = EFBIG;
    else {
        cap = (size_t)st.st_size + 1; /* one more byte: the file may have grown since fstat */
        buf = malloc(cap + 1);
        if (!buf)
            err = ENOMEM;
    }
    while (!err) {
        if (n == cap) {
            if (n > limit) {
                err = EFBIG;
                break;
            }
            size_t nc = cap > limit / 2 ? limit + 1 : 2 * cap;
            char *nb = realloc(buf, nc + 1);
            if (!nb) {
                err = ENOMEM;
                break;
            }
            buf = nb;
            cap = nc;
        }
        ssize_t k = read(fd, buf + n, cap - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            err = errno;
        else if (k == 0)
            break;
        else
            n += (size_t)k;
    }
    close(fd);
    if (!err && n > limit)
        err = EFBIG;
    if (err) {
        free(buf);
        errno = err;
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

char *dsg_read_file(const char *path, size_t limit, size_t *len)
{
    return read_file(path, limit, len, 0);
}

const char *dsg_read_strerror(int err, size_t limit)
{
    static char buf[64];
    if (err == EINVAL)
        return "not a regular file";
    if (err == ELOOP)
        return "a symbolic link";
    if (err != EFBIG)
        return strerror(err);
    if (limit % ((size_t)1 << 20) == 0)
        snprintf(buf, sizeof buf, "larger than %zu MiB", limit >> 20);
    else
        snprintf(buf, sizeof buf, "larger than %zu bytes", limit);
    return buf;
}

static int add_source(dsg_sandbox *sb, const char *path, char *text, size_t len)
{
    if (sb->nsources == sb->capsources) {
        size_t cap = sb->capsources ? 2 * sb->capsources : 4;
        dsg_source *s = realloc(sb->sources, cap * sizeof *s);
        if (!s)
            return -1;
        sb->sources = s;
        sb->capsources = cap;
    }
    char *p = strdup(path);
    if (!p)
        return -1;
    sb->sources[sb->nsources++] = (dsg_source){p, text, len};
    return 0;
}


/* A file's own environment (spec and each import): a copy of ENV_KEY's, with its own copies of the
 * math, string and table libraries, so that what one file assigns (a global, `ipairs`, or
 * `string.format` replaced) cannot change what another computes: an imported model file means
 * what its text says, whoever imports it. */
static void push_file_env(lua_State *L)
{
    lua_getfield(L, LUA_REGISTRYINDEX, ENV_KEY);
    const int base = lua_gettop(L);
    lua_newtable(L);
    const int env = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, base)) {
        if (lua_type(L, -1) == LUA_TTABLE) { /* a library: copied, with its metatable */
            const int lib = lua_gettop(L);
            lua_newtable(L);
            lua_pushnil(L);
            while (lua_next(L, lib)) {
                lua_pushvalue(L, -2);
                lua_insert(L, -2);
                lua_rawset(L, -4);
            }
            if (lua_getmetatable(L, lib))
                lua_setmetatable(L, -2);
            lua_remove(L, lib);
        }
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, env);
    }
    lua_getmetatable(L, base);
    lua_setmetatable(L, env);
    lua_getfield(L, LUA_REGISTRYINDEX, ENVS_KEY);
    lua_pushvalue(L, env);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    lua_pop(L, 1);
    lua_remove(L, base);
}
/* Loads and runs one file in the sandbox environment; pushes its result. Raises Lua errors. path
 * is the file as messages name it; it is read from open_path with open_flags. */
static void run_file(lua_State *L, dsg_sandbox *sb, const char *path, const char *open_path, int open_flags)
{
    size_t len;
    char *text = read_file(open_path, DSG_SPEC_FILE_LIMIT, &len, open_flags);
    if (!text)
        luaL_error(L, "cannot read '%s': %s", path, dsg_read_strerror(errno, DSG_SPEC_FILE_LIMIT));
    /* The text stays in C memory until the generator ends (hashes, line maps, the depfile): it
     * counts towards the spec's memory limit, or imports would bypass it. */
    size_t cost = len + 1 + strlen(path) + 1 + sizeof(dsg_source);
    if (cost > sb->limit - sb->used) {
        free(text);
        luaL_error(L, "spec exceeds the memory limit of %d MiB (reading '%s'; the text of imported files counts "
                      "towards it)", (int)(DSG_SPEC_MEMORY_LIMIT >> 20), path);
    }
    if (add_source(sb, path, text, len) != 0) {
        free(text);
        luaL_error(L, "out of memory");
    }
    sb->used += cost;
    lua_pushfstring(L, "@%s", path);
    const char *chunkname = lua_tostring(L, -1);
    int rc = luaL_loadbufferx(L, text, len, chunkname, "t");
    lua_remove(L, -2);
    if (rc != LUA_OK) { /* its position is the parser's, to be believed (report_error) */
        free(sb->parse_error);
        const char *m = lua_tostring(L, -1);
        sb->parse_error = m ? strdup(m) : NULL;
        lua_error(L);
    }
    push_file_env(L);
    lua_setupvalue(L, -2, 1);
    lua_call(L, 0, 1);
}

/* Copies the table at idx, nested tables too, down to DSG_SPEC_TABLE_DEPTH levels; deeper is an
 * error (a table that contains itself is one). The copy is a tree no deeper than that, so the
 * comparison with it (deep_equal) recurses no deeper either. Pushes the copy. */
static void deep_copy(lua_State *L, int idx, int depth, const char *name)
{
    if (depth >= DSG_SPEC_TABLE_DEPTH)
        luaL_error(L, "import: the table of '%s' is nested more than %d levels deep (or contains itself)", name,
                   DSG_SPEC_TABLE_DEPTH);
    luaL_checkstack(L, 4, "import: table too deep");
    lua_newtable(L);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pushvalue(L, -2);
        if (lua_istable(L, -2))
            deep_copy(L, lua_absindex(L, -2), depth + 1, name);
        else
            lua_pushvalue(L, -2);
        lua_rawset(L, -5);
        lua_pop(L, 1);
    }
}

/* Whether the values at a and b are the same data: tables by content, numbers by value and
 * subtype (NaN equals NaN: it is the value the file wrote), anything else by identity. Runs in
 * protected mode: it grows the stack through luaL_checkstack. */
static int deep_equal(lua_State *L, int a, int b, int depth)
{
    int type = lua_type(L, a);
    if (type != lua_type(L, b))
        return 0;
    if (type == LUA_TNUMBER) {
        if (lua_isinteger(L, a) != lua_isinteger(L, b))
            return 0;
        lua_Number x = lua_tonumber(L, a), y = lua_tonumber(L, b);
        return lua_isinteger(L, a) ? lua_tointeger(L, a) == lua_tointeger(L, b) : x == y || (x != x && y != y);
    }
    if (type != LUA_TTABLE || depth >= DSG_SPEC_TABLE_DEPTH)
        return lua_rawequal(L, a, b);
    luaL_checkstack(L, 4, "comparing imported tables");
    if (lua_rawlen(L, a) != lua_rawlen(L, b))
        return 0;
    for (int pass = 0; pass < 2; pass++) { /* every key of a in b, then every key of b in a */
        int x = pass ? b : a, y = pass ? a : b;
        lua_pushnil(L);
        while (lua_next(L, x)) {
            lua_pushvalue(L, -2);
            lua_rawget(L, y);
            int eq = pass ? !lua_isnil(L, -1) : deep_equal(L, lua_absindex(L, -2), lua_absindex(L, -1), depth + 1);
            lua_pop(L, 2);
            if (!eq) {
                lua_pop(L, 1);
                return 0;
            }
        }
    }
    return 1;
}

/* import("name.lua"): runs another file of the spec's folder (or a subfolder) in the same sandbox
 * and returns its table, so several specs can share one model geometry. */
static int l_import(lua_State *L)
{
    dsg_sandbox *sb;
    lua_getallocf(L, (void **)&sb);
    const char *name = luaL_checkstring(L, 1);
    size_t n = strlen(name);
    if (n < 5 || strcmp(name + n - 4, ".lua") != 0 || name[0] == '/' || strstr(name, "..") ||
        strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-/") != n)
        return luaL_error(L, "import: '%s' is not a relative path to a .lua file below the spec's folder", name);
    if (sb->import_depth >= DSG_SPEC_IMPORT_DEPTH)
        return luaL_error(L, "import: more than %d nested imports (a cycle?)", DSG_SPEC_IMPORT_DEPTH);
    if (sb->nimports >= DSG_SPEC_IMPORT_LIMIT)
        return luaL_error(L, "import: more than %d imports in one spec", DSG_SPEC_IMPORT_LIMIT);
    sb->nimports++;
    const char *spec = sb->sources[0].path;
    const char *slash = strrchr(spec, '/');
    if (slash)
        lua_pushlstring(L, spec, (size_t)(slash - spec + 1));
    else
        lua_pushliteral(L, "");
    int folder = lua_gettop(L);
    lua_pushvalue(L, folder);
    lua_pushstring(L, name);
    lua_concat(L, 2);
    const char *path = lua_tostring(L, -1);
    /* Below the spec's folder once symbolic links are resolved, and opened by that resolved path
     * without following a link in its last component. */
    char *real = realpath(path, NULL);
    if (!real)
        return luaL_error(L, "cannot read '%s': %s", path, strerror(errno));
    lua_pushstring(L, real);
    free(real);
    const char *dir = lua_tostring(L, folder)[0] ? lua_tostring(L, folder) : ".";
    char *realdir = realpath(dir, NULL);
    if (!realdir)
        return luaL_error(L, "cannot read '%s': %s", dir, strerror(errno));
    lua_pushstring(L, realdir);
    free(realdir);
    const char *rpath = lua_tostring(L, -2), *rdir = lua_tostring(L, -1);
    size_t dl = strlen(rdir);
    if (strcmp(rdir, "/") != 0 && (strncmp(rpath, rdir, dl) != 0 || rpath[dl] != '/'))
        return luaL_error(L, "import: '%s' leads outside the spec's folder (through a symbolic link)", name);
    lua_pop(L, 1);
    const char *open_path = lua_tostring(L, -1);
    sb->import_depth++;
    run_file(L, sb, path, open_path, O_NOFOLLOW);
    sb->import_depth--;
    lua_remove(L, -2); /* the resolved path */
    if (!lua_istable(L, -1))
        return luaL_error(L, "import: '%s' returned %s, expected a table", name, luaL_typename(L, -1));
    lua_getfield(L, LUA_REGISTRYINDEX, ORIGIN_KEY);
    lua_pushvalue(L, -2);
    lua_pushvalue(L, -4);
    lua_rawset(L, -3);
    lua_pop(L, 1);
    /* Remember a copy and where it was imported: an imported table must reach validation as its
     * file wrote it, or errors would point at lines that do not hold the offending value. */
    lua_Debug ar;
    int line = lua_getstack(L, 1, &ar) && lua_getinfo(L, "Sl", &ar) ? ar.currentline : 0;
    lua_getfield(L, LUA_REGISTRYINDEX, SNAPSHOT_KEY);
    lua_createtable(L, 4, 0);
    lua_pushvalue(L, -3);
    lua_rawseti(L, -2, 1);
    deep_copy(L, lua_absindex(L, -3), 0, name);
    lua_rawseti(L, -2, 2);
    lua_pushstring(L, path);
    lua_rawseti(L, -2, 3);
    lua_pushinteger(L, line);
    lua_rawseti(L, -2, 4);
    lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
    lua_pop(L, 1);
    return 1;
}

/* string.rep with a bound: the memory limit would stop it too, but this says why. An empty result
 * is returned here: Lua's rep loops n times even over empty strings (centuries for maxinteger). */
static int l_rep(lua_State *L)
{
    size_t len;
    luaL_checklstring(L, 1, &len);
    lua_Integer n = luaL_checkinteger(L, 2);
    size_t seplen = 0;
    if (!lua_isnoneornil(L, 3))
        luaL_checklstring(L, 3, &seplen);
    if (n <= 0 || len + seplen == 0) {
        lua_pushliteral(L, "");
        return 1;
    }
    if ((double)n * (double)(len + seplen) > (double)DSG_SPEC_STRING_LIMIT)
        return luaL_error(L, "string.rep: result larger than the spec limit of 1 MiB");
    lua_getfield(L, LUA_REGISTRYINDEX, "dsagen.rep");
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

/* string.find of plain text only: Lua's patterns backtrack without a bound on time (".-.-.-.-b"
 * over a few hundred characters takes minutes inside one instruction), so pattern matching
 * (match, gmatch, gsub, find with a pattern) is not offered. */
/* string.find of plain text, Lua's results (start and end, or nil; init as Lua reads it), searched
 * with glibc's memmem, which takes time linear in the lengths: Lua's own plain search compares at
 * every offset, quadratic in one call (a 2 MiB haystack took 30 s), where the time limit is checked
 * only between calls. */
/* a < b, as table.sort compares without a function of the spec's */
static int l_less(lua_State *L)
{
    lua_pushboolean(L, lua_compare(L, 1, 2, LUA_OPLT));
    return 1;
}

/* table.sort, with every comparison a call: the hook checks the clock at each call, and without a
 * comparator a sort is one C call that compares for as long as it takes (400,000 copies of a 1 MiB
 * string took minutes), which only the watchdog would end, without the spec's line. */
static int l_sort(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 2);
    if (lua_isnil(L, 2)) {
        lua_pushcfunction(L, l_less);
        lua_replace(L, 2);
    }
    lua_getfield(L, LUA_REGISTRYINDEX, "dsagen.sort");
    lua_insert(L, 1);
    lua_call(L, 2, 0);
    return 0;
}

static int l_find(lua_State *L)
{
    size_t len, plen;
    const char *s = luaL_checklstring(L, 1, &len);
    const char *p = luaL_checklstring(L, 2, &plen);
    lua_Integer init = luaL_optinteger(L, 3, 1);
    int plain = lua_toboolean(L, 4);
    for (size_t i = 0; i < plen && !plain; i++)
        if (strchr("^$*+?.([%-", p[i]) && p[i])
            return luaL_error(L, "string.find: patterns are not available in a spec (their matching time has no "
                                 "bound); search for plain text: s:find(text, 1, true)");
    /* init: from the end where negative, 1 below 1, nothing found past len + 1 */
    size_t from = init > 0                                 ? (size_t)init - 1
                  : init == 0 || init < -(lua_Integer)len ? 0 /* not -init: math.mininteger has none */
                                                          : len - (size_t)(-init);
    if (from > len) {
        lua_pushnil(L);
        return 1;
    }
    const char *at = memmem(s + from, len - from, p, plen);
    if (!at) {
        lua_pushnil(L);
        return 1;
    }
    lua_pushinteger(L, (lua_Integer)(at - s) + 1);
    lua_pushinteger(L, (lua_Integer)(at - s) + (lua_Integer)plen);
    return 2;
}

/* A string function the sandbox does not offer is an error that says why, not a nil. */
static int l_string_index(lua_State *L)
{
    if (lua_type(L, 2) != LUA_TSTRING)
        return 0;
    return luaL_error(L, "'string.%s' is not available in a spec: specs are data; string offers byte, char, "
                         "find (plain text), format, len, lower, rep, reverse, sub and upper (no patterns: their "
                         "matching time has no bound)",
                      lua_tostring(L, 2));
}

/* Reading a name the sandbox does not provide is an error that says why, not a nil. */
static int l_env_index(lua_State *L)
{
    const char *name = lua_tostring(L, 2);
    return luaL_error(L, "'%s' is not available in a spec: specs are data, run in a sandbox that "
                         "offers only math, string, table, import and the basic functions",
                      name ? name : "?");
}

static void copy_lib(lua_State *L, const char *lib, const char *const *names)
{
    lua_getglobal(L, lib);
    lua_newtable(L);
    for (const char *const *n = names; *n; n++) {
        lua_getfield(L, -2, *n);
        lua_setfield(L, -2, *n);
    }
    lua_remove(L, -2);
}

/* The library copy on top of the stack gets wrapper as its `name`; the library's own function is
 * kept at registry["dsagen.<name>"] for the wrapper to call. */
static void wrap_lib_function(lua_State *L, const char *lib, const char *name, lua_CFunction wrapper)
{
    const char *key = lua_pushfstring(L, "dsagen.%s", name); /* valid while on the stack */
    lua_getglobal(L, lib);
    lua_getfield(L, -1, name);
    lua_setfield(L, LUA_REGISTRYINDEX, key);
    lua_pop(L, 2);
    lua_pushcfunction(L, wrapper);
    lua_setfield(L, -2, name);
}

/* A table with weak keys at registry[key] (what it maps goes when its keys do). */
static void registry_weak_table(lua_State *L, const char *key)
{
    lua_newtable(L);
    lua_newtable(L);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_setfield(L, LUA_REGISTRYINDEX, key);
}

static int setup(lua_State *L)
{
    luaL_requiref(L, LUA_GNAME, luaopen_base, 1);
    luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
    luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
    luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
    lua_settop(L, 0);

    lua_newtable(L); /* the spec's _ENV */
    static const char *const base[] = {"assert", "error", "ipairs", "next", "pairs", "select",
                                       "tonumber", "tostring", "type", NULL};
    for (const char *const *n = base; *n; n++) {
        lua_getglobal(L, *n);
        lua_setfield(L, -2, *n);
    }
    static const char *const math[] = {"abs", "ceil", "floor", "fmod", "huge", "log", "exp", "max",
                                       "min", "pi", "sqrt", "tointeger", "type", "maxinteger",
                                       "mininteger", NULL};
    copy_lib(L, "math", math);
    lua_setfield(L, -2, "math");
    static const char *const string[] = {"byte", "char", "format", "len", "lower", "reverse", "sub", "upper", NULL};
    copy_lib(L, "string", string);
    wrap_lib_function(L, "string", "rep", l_rep);
    lua_pushcfunction(L, l_find);
    lua_setfield(L, -2, "find");
    lua_newtable(L);
    lua_pushcfunction(L, l_string_index);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
    /* ("x"):rep(n) goes through the string metatable: point it at the bounded copy. */
    lua_pushliteral(L, "");
    lua_getmetatable(L, -1);
    lua_pushvalue(L, -3);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 2);
    lua_setfield(L, -2, "string");
    static const char *const table[] = {"concat", "insert", "remove", "unpack", NULL};
    copy_lib(L, "table", table);
    wrap_lib_function(L, "table", "sort", l_sort);
    lua_setfield(L, -2, "table");
    lua_pushcfunction(L, l_import);
    lua_setfield(L, -2, "import");
    lua_newtable(L);
    lua_pushcfunction(L, l_env_index);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
    lua_setfield(L, LUA_REGISTRYINDEX, ENV_KEY);
    registry_weak_table(L, ENVS_KEY);
    registry_weak_table(L, ORIGIN_KEY);
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, SNAPSHOT_KEY);
    return 0;
}

/* Every Lua call on the sandbox's state runs in protected mode; should one not, an error must not
 * abort() the generator: report it and exit 1 (before the output commit, which uses no Lua). */
static int panic(lua_State *L)
{
    const char *msg = lua_tostring(L, -1);
    fputs("dsagen: error: internal error in the spec sandbox: ", stderr);
    dsg_fputs_escaped(msg ? msg : "?", msg ? strlen(msg) : 1, stderr);
    fputs("\n", stderr);
    _exit(1);
}

dsg_sandbox *dsg_sandbox_new(void)
{
    dsg_sandbox *sb = calloc(1, sizeof *sb);
    if (!sb)
        return NULL;
    sb->limit = (size_t)64 << 20;
    sb->L = lua_newstate(limited_alloc, sb);
    if (!sb->L) {
        free(sb);
        return NULL;
    }
    lua_atpanic(sb->L, panic);
    lua_pushcfunction(sb->L, setup);
    if (lua_pcall(sb->L, 0, 0, 0) != LUA_OK) {
        dsg_sandbox_free(sb);
        return NULL;
    }
    return sb;
}

void dsg_sandbox_free(dsg_sandbox *sb)
{
    if (!sb)
        return;
    if (sb->L)
        lua_close(sb->L);
    for (size_t i = 0; i < sb->nsources; i++) {
        free(sb->sources[i].path);
        free(sb->sources[i].text);
    }
    free(sb->sources);
    free(sb->parse_error);
    free(sb);
}

lua_State *dsg_sandbox_state(dsg_sandbox *sb)
{
    return sb->L;
}

static int run_protected(lua_State *L)
{
    dsg_sandbox *sb;
    lua_getallocf(L, (void **)&sb);
    run_file(L, sb, lua_tostring(L, 1), lua_tostring(L, 1), 0);
    return 1;
}

/* Compares every imported table with its snapshot; returns nothing when all are unchanged, else
 * the file and the line of the first changed one's import. */
static int check_snapshots(lua_State *L)
{
    lua_getfield(L, LUA_REGISTRYINDEX, SNAPSHOT_KEY);
    for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, -1); i++) {
        lua_rawgeti(L, -1, i);
        lua_rawgeti(L, -1, 1);
        lua_rawgeti(L, -2, 2);
        int same = deep_equal(L, lua_absindex(L, -2), lua_absindex(L, -1), 0);
        lua_pop(L, 2);
        if (!same) {
            lua_rawgeti(L, -1, 3);
            lua_rawgeti(L, -2, 4);
            return 2;
        }
        lua_pop(L, 1);
    }
    return 0;
}

/* How Lua's messages name the file at path (luaO_chunkid of "@path"): the path, or "..." and its
 * last LUA_IDSIZE - 4 bytes where it is longer than LUA_IDSIZE - 2. */
static void chunk_id(const char *path, char *out, size_t n)
{
    const size_t len = strlen(path);
    if (len + 1 <= LUA_IDSIZE)
        snprintf(out, n, "%s", path);
    else
        snprintf(out, n, "...%s", path + len - (LUA_IDSIZE - 4));
}

/* msg's length of a prefix "<name>:<line>: " with name given, and its line; 0 where it has none. */
static size_t position_prefix(const char *msg, const char *name, int *line)
{
    const size_t n = strlen(name);
    if (strncmp(msg, name, n) != 0 || msg[n] != ':' || !isdigit((unsigned char)msg[n + 1]))
        return 0;
    const char *q = msg + n + 1;
    int v = 0;
    while (isdigit((unsigned char)*q) && v < 100000000)
        v = v * 10 + (*q++ - '0');
    if (q[0] != ':' || q[1] != ' ')
        return 0;
    *line = v;
    return (size_t)(q + 2 - msg);
}

/* A spec's error, at the position Lua put before it where that position is a frame that was running
 * when it was raised (a runtime error, error() at levels 1 and 2, a library function's error:
 * error_position), or where the parser put it (a file that does not parse): by the file's full
 * path, or as Lua shortens a long one, so that a path holding ":N: " is not split inside. Any other prefix is the spec's own text
 * (error("specs/glm5.2.lua:31: ...", 0), or its own file at another line): reported where the code
 * last ran, the message whole. */
static void report_error(dsg_sandbox *sb, dsg_diag *d, const char *path, const char *msg)
{
    char id[LUA_IDSIZE + 8];
    for (size_t i = 0; i < sb->nsources; i++) {
        const char *f = sb->sources[i].path;
        int line = 0;
        size_t at = position_prefix(msg, f, &line);
        if (!at) {
            chunk_id(f, id, sizeof id);
            at = position_prefix(msg, id, &line);
        }
        if (at && (sb->error_at_frame || (sb->parse_error && !strcmp(sb->parse_error, msg)))) {
            dsg_error(d, f, line, "%s", msg + at);
            return;
        }
    }
    dsg_error(d, sb->last_source >= 0 ? sb->sources[sb->last_source].path : path, sb->last_line, "%s", msg);
}

/* The message handler of the spec's run, where the error is raised, before the stack unwinds:
 * whether the message's "file:line: " prefix is a running Lua frame's file (as its full path or as
 * Lua shortens it) and current line. A prefix the spec wrote itself (error("x.lua:1: ...", 0))
 * names no such frame, but by chance. */
static int error_position(lua_State *L)
{
    dsg_sandbox *sb;
    lua_getallocf(L, (void **)&sb);
    sb->error_at_frame = 0;
    const char *msg = lua_tostring(L, 1);
    lua_Debug at;
    /* the frames a position can name are the innermost few (the raising code, its caller for
     * error(msg, 2), a library function's caller): a bounded walk, which stops at the first match,
     * so that an error 100,000 calls deep costs nothing (lua_getstack walks from the top) */
    for (int level = 0; msg && !sb->error_at_frame && level < 256 && lua_getstack(L, level, &at); level++) {
        if (!lua_getinfo(L, "Sl", &at) || at.source[0] != '@' || at.currentline <= 0)
            continue;
        char want[32];
        snprintf(want, sizeof want, ":%d: ", at.currentline);
        const char *names[2] = {at.source + 1, at.short_src};
        for (int k = 0; k < 2; k++) {
            const size_t n = strlen(names[k]);
            if (!strncmp(msg, names[k], n) && !strncmp(msg + n, want, strlen(want)))
                sb->error_at_frame = 1;
        }
    }
    lua_settop(L, 1);
    return 1;
}

int dsg_sandbox_run(dsg_sandbox *sb, const char *path, dsg_diag *d)
{
    lua_State *L = sb->L;
    /* Start the count from what setup used, so the limit bounds the spec alone. */
    sb->limit = sb->used + DSG_SPEC_MEMORY_LIMIT;
    sb->instructions = 0;
    sb->last_line = 0;
    sb->last_source = -1;
    sb->start = dsg_clock_now();
    sb->error_at_frame = 0;
    lua_pushcfunction(L, error_position);
    const int handler = lua_gettop(L);
    lua_pushcfunction(L, run_protected);
    lua_pushstring(L, path);
    lua_sethook(L, hook, LUA_MASKCOUNT | LUA_MASKLINE | LUA_MASKCALL, HOOK_COUNT);
    int rc = lua_pcall(L, 1, 1, handler);
    lua_sethook(L, NULL, 0, 0);
    lua_remove(L, handler);
    /* Validation reads the result with ordinary headroom; the spec's code no longer runs. */
    sb->limit = sb->used + ((size_t)64 << 20);
    if (rc == LUA_ERRMEM) {
        const char *file = sb->last_source >= 0 ? sb->sources[sb->last_source].path : path;
        dsg_error(d, file, sb->last_line, "spec exceeds the memory limit of %zu MiB",
                  DSG_SPEC_MEMORY_LIMIT >> 20);
        lua_pop(L, 1);
        return -1;
    }
    if (rc != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        report_error(sb, d, path, msg ? msg : "spec raised an error that is not a string");
        lua_pop(L, 1);
        return -1;
    }
    int top = lua_gettop(L);
    lua_pushcfunction(L, check_snapshots);
    rc = lua_pcall(L, 0, 2, 0);
    if (rc != LUA_OK) {
        dsg_error(d, path, 0, "cannot compare the imported tables with what was imported: %s",
                  rc == LUA_ERRMEM ? "out of memory" : lua_tostring(L, -1));
        lua_settop(L, top);
        return -1;
    }
    if (!lua_isnil(L, -2)) {
        dsg_error(d, path, (int)lua_tointeger(L, -1),
                  "the table imported from %s is changed after import; imported tables are read-only "
                  "(build a new table that copies the fields you keep)",
                  lua_tostring(L, -2));
        lua_settop(L, top);
        return -1;
    }
    lua_settop(L, top);
    return 0;
}

int dsg_sandbox_is_env(dsg_sandbox *sb, int idx)
{
    lua_State *L = sb->L;
    idx = lua_absindex(L, idx);
    lua_getfield(L, LUA_REGISTRYINDEX, ENVS_KEY);
    lua_pushvalue(L, idx);
    int is = lua_rawget(L, -2) != LUA_TNIL;
    lua_pop(L, 2);
    return is;
}

double dsg_sandbox_started(const dsg_sandbox *sb)
{
    return sb->start;
}

int dsg_sandbox_last_line(const dsg_sandbox *sb)
{
    return sb->last_line;
}

size_t dsg_sandbox_nsources(const dsg_sandbox *sb)
{
    return sb->nsources;
}

const dsg_source *dsg_sandbox_source(const dsg_sandbox *sb, size_t i)
{
    return i < sb->nsources ? &sb->sources[i] : NULL;
}

const char *dsg_sandbox_origin(dsg_sandbox *sb, int idx)
{
    lua_State *L = sb->L;
    idx = lua_absindex(L, idx);
    lua_getfield(L, LUA_REGISTRYINDEX, ORIGIN_KEY);
    lua_pushvalue(L, idx);
    lua_rawget(L, -2);
    const char *origin = lua_tostring(L, -1); /* interned in the state: stays valid */
    lua_pop(L, 2);
    return origin;
}
