/* The generator's own Lua state: Penlight's lexer and templates, driven from C. */
#include "trusted.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>

extern const char dsg_trusted_lua[];
extern const size_t dsg_trusted_lua_len;

struct dsg_trusted {
    lua_State *L;
    int module; /* registry reference to gen/trusted.lua's table */
};

dsg_trusted *dsg_trusted_new(dsg_diag *d)
{
    dsg_trusted *t = calloc(1, sizeof *t);
    if (!t || !(t->L = luaL_newstate())) {
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

int dsg_trusted_linemap(dsg_trusted *t, const char *file, const char *text, size_t len, dsg_diag *d)
{
    lua_State *L = t->L;
    push_fn(t, "linemap");
    lua_pushstring(L, file);
    lua_pushlstring(L, text, len);
    if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
        /* The sandbox already parsed this file, so the lexer failing is unexpected: say so. */
        dsg_error(d, file, 0, "cannot index field lines: %s", lua_tostring(L, -1));
        lua_pop(L, 1);
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
