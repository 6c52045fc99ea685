/* The generator's own Lua state: Penlight's lexer and templates, driven from C. */
#include "trusted.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox.h"

extern const char dsg_trusted_lua[];
extern const size_t dsg_trusted_lua_len;

struct dsg_trusted {
    lua_State *L;
    int module;          /* registry reference to gen/trusted.lua's table */
    size_t used, limit;  /* the state's allocations; the most it may hold (SIZE_MAX but in a line map) */
    double deadline;     /* a line map's end of time (dsg_clock_now; 0: none) */
};

/* A line map is the generator's work on a spec's text, so the spec's bounds apply to it: its time
 * counts within the spec's (DSG_SPEC_TIME_LIMIT from the sandbox's start: the Penlight lexer takes
 * ~4 s a MiB of one-character tokens), and its memory is capped (a field a map entry: 250,000
 * fields of a 1 MiB file take ~50 MB). */
#define DSG_LINEMAP_MEMORY ((size_t)64 << 20)
static const char TIME_OUT[] = "dsagen: line map time out";

static void *counted_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    dsg_trusted *t = ud;
    return dsg_counted_realloc(&t->used, t->limit, ptr, osize, nsize);
}

static void deadline_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    dsg_trusted *t;
    lua_getallocf(L, (void **)&t);
    if (t->deadline > 0 && dsg_clock_now() > t->deadline) {
        lua_pushstring(L, TIME_OUT);
        lua_error(L);
    }
}

dsg_trusted *dsg_trusted_new(dsg_diag *d)
{
    dsg_trusted *t = calloc(1, sizeof *t);
    if (t)
        t->limit = SIZE_MAX;
    if (!t || !(t->L = lua_newstate(counted_alloc, t))) {
        free(t);
        dsg_error(d, NULL, 0, "out of memory");
        return NULL;
    }
    lua_State *L = t->L;
    luaL_openlibs(L);
    /* Penlight from the system's Lua tree only: never from the working directory. */
    lua_getglobal(L, "package");
    lua_pushliteral(L, "/usr/share/lua/5.4/?.lua;/usr/share/lua/5.4/?/init.lua");
    lua_setfield(L, -2, "path");
    lua_pushliteral(L, "");
    lua_setfield(L, -2, "cpath");
    lua_pop(L, 1);
    if (luaL_loadbufferx(L, dsg_trusted_lua, dsg_trusted_lua_len, "@gen/trusted.lua", "t") != LUA_OK ||
        lua_pcall(L, 0, 1, 0) != LUA_OK) {
        dsg_error(d, NULL, 0, "cannot load the template engine (is lua-penlight installed?): %s",
                  lua_tostring(L, -1));
        dsg_trusted_free(t);
        return NULL;
    }
    t->module = luaL_ref(L, LUA_REGISTRYINDEX);
    return t;
}

void dsg_trusted_free(dsg_trusted *t)
{
    if (!t)
        return;
    if (t->L)
        lua_close(t->L);
    free(t);
}

lua_State *dsg_trusted_state(dsg_trusted *t)
{
    return t->L;
}

static void push_fn(dsg_trusted *t, const char *name)
{
    lua_rawgeti(t->L, LUA_REGISTRYINDEX, t->module);
    lua_getfield(t->L, -1, name);
    lua_remove(t->L, -2);
}

/* Runs of more digits than this reach the lexer as one digit (push_short_digit_runs). */
#define LONG_DIGITS 64

/* Pushes text with every run of more than LONG_DIGITS digits cut to its first digit. Penlight's
 * lexer tries a numeral with an exponent first, and on a run of n digits without one its pattern
 * backtracks n^2 / 2 steps inside one string.find (100,000 digits: 51 s); the line map needs the
 * lines and the field names, which the cut leaves as they were (a digit run never holds a newline;
 * a string key of such digits then finds its table's line instead of its own). */
static void push_short_digit_runs(lua_State *L, const char *text, size_t len)
{
    size_t run = 0, i = 0;
    for (; i < len && run <= LONG_DIGITS; i++)
        run = text[i] >= '0' && text[i] <= '9' ? run + 1 : 0;
    if (run <= LONG_DIGITS) { /* none: as it is */
        lua_pushlstring(L, text, len);
        return;
    }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (i = 0; i < len;) {
        size_t e = i;
        while (e < len && text[e] >= '0' && text[e] <= '9')
            e++;
        if (e == i) { /* not a digit */
            luaL_addchar(&b, text[i]);
            i++;
        } else { /* a run of digits [i, e) */
            luaL_addlstring(&b, text + i, e - i > LONG_DIGITS ? 1 : e - i);
            i = e;
        }
    }
    luaL_pushresult(&b);
}

int dsg_trusted_linemap(dsg_trusted *t, const char *file, const char *text, size_t len, double started,
                        dsg_diag *d)
{
    lua_State *L = t->L;
    push_fn(t, "linemap");
    lua_pushstring(L, file);
    push_short_digit_runs(L, text, len);
    t->limit = t->used + DSG_LINEMAP_MEMORY;
    t->deadline = started + DSG_SPEC_TIME_LIMIT;
    lua_sethook(L, deadline_hook, LUA_MASKCOUNT, 10000);
    const int rc = lua_pcall(L, 2, 0, 0);
    lua_sethook(L, NULL, 0, 0);
    t->limit = SIZE_MAX;
    t->deadline = 0;
    if (rc != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        if (rc == LUA_ERRMEM)
            dsg_error(d, file, 0, "spec text too large: the line map of its fields needs more than %zu MiB",
                      DSG_LINEMAP_MEMORY >> 20);
        else if (msg && !strcmp(msg, TIME_OUT))
            dsg_error(d, file, 0, "spec exceeds the time limit of %d seconds (indexing the lines of its fields; "
                                  "the text of imported files counts towards it)",
                      DSG_SPEC_TIME_LIMIT);
        else /* the sandbox already parsed this file, so the lexer failing is unexpected: say so */
            dsg_error(d, file, 0, "cannot index field lines: %s", msg ? msg : "(no message)");
        lua_settop(L, 0);
        /* the map may be half made: a later error in this file must not read it */
        push_fn(t, "forget");
        lua_pushstring(L, file);
        lua_pcall(L, 1, 0, 0);
        lua_settop(L, 0);
        return -1;
    }
    return 0;
}

int dsg_trusted_line(dsg_trusted *t, const char *file, const char *path)
{
    lua_State *L = t->L;
    push_fn(t, "line");
    lua_pushstring(L, file);
    lua_pushstring(L, path);
    if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
        lua_pop(L, 1);
        return 0;
    }
    int line = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    return line;
}

char *dsg_trusted_render(dsg_trusted *t, const char *name, const char *src, size_t len, dsg_diag *d)
{
    lua_State *L = t->L;
    push_fn(t, "render");
    lua_pushstring(L, name);
    lua_pushlstring(L, src, len);
    lua_pushvalue(L, -4);
    lua_remove(L, -5);
    if (lua_pcall(L, 3, 2, 0) != LUA_OK) {
        dsg_error(d, name, 0, "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
        return NULL;
    }
    char *out = NULL;
    if (lua_isstring(L, -2)) {
        size_t n;
        const char *s = lua_tolstring(L, -2, &n);
        out = malloc(n + 1);
        if (out) {
            memcpy(out, s, n);
            out[n] = '\0';
        } else {
            dsg_error(d, name, 0, "out of memory");
        }
    } else {
        /* render() formats its messages as "name:line: error: text" already. */
        dsg_error_formatted(d, lua_tostring(L, -1));
    }
    lua_pop(L, 2);
    return out;
}
