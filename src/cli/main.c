/*
** main.c -- the weft command line: run scripts with the weft module loaded.
** Takes: the public C API (include/weft.h) only. Gives: the `weft` program.
**
**   weft script.lua [args]   run a script (arg table as luajit builds it)
**   weft -e code             run a string
**   weft -v                  print the version
**   weft info                versions, CPU, threads, CUDA availability
**   weft                     a REPL on a terminal, else read a script from stdin
**
** Ctrl-C while code runs stops it (weft_interrupt: kernels at their next
** loop back-edge, Lua at its next instruction) with "interrupted" and exit
** status 130; a second Ctrl-C before it has stopped ends the process. The
** script's os.exit is kept (the CLI does not sandbox it).
*/
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "weft.h"

static const char *progname = "weft";

/* The state a Ctrl-C interrupts while code runs (NULL otherwise): a signal
** handler reaches nothing but globals. */
static weft_State *volatile interruptible;

/* First Ctrl-C: ask the running code to stop. The handler resets itself,
** so a second one before the code has stopped ends the process. */
static void on_sigint(int sig) {
  signal(sig, SIG_DFL);
  weft_State *W = interruptible;
  if (W) weft_interrupt(W);
}

/* weft_dostring with Ctrl-C armed for the duration of the call. */
static int dostring(weft_State *W, const char *code) {
  interruptible = W;
  signal(SIGINT, on_sigint);
  int st = weft_dostring(W, code);
  signal(SIGINT, SIG_DFL);
  interruptible = NULL;
  return st;
}

static void usage(void) {
  fprintf(stderr,
          "usage: %s [options] [script [args]]\n"
          "  -e code   run the string 'code'\n"
          "  -v        print the version and exit\n"
          "  -h        print this help\n"
          "  info      print versions, CPU features, threads and CUDA availability\n"
          "  -         read the script from stdin\n"
          "With no script, starts a REPL on a terminal.\n",
          progname);
}

static int report(weft_State *W, int status) {
  if (status != WEFT_OK) {
    fprintf(stderr, "%s: %s\n", progname, weft_errmsg(W));
    fflush(stderr);
  }
  return status;
}

/* Build the global `arg` table like luajit does: arg[0] is the script,
** arg[1..] its arguments, negative indices the interpreter and options. */
static void set_args(lua_State *L, int argc, char **argv, int script) {
  lua_createtable(L, argc - script - 1, script + 1);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}

/* Run a script file (or stdin when path is "-") with its arguments as `...`. */
static int run_script(weft_State *W, const char *path, int nargs, char **args) {
  lua_State *L = weft_lua(W);
  /* Stash the chunk and its arguments in a global and call them from
  ** weft_dostring, which adds the traceback on errors. */
  lua_createtable(L, nargs + 1, 0);
  int st = luaL_loadfile(L, strcmp(path, "-") == 0 ? NULL : path);
  if (st != 0) {
    fprintf(stderr, "%s: %s\n", progname, lua_tostring(L, -1));
    lua_pop(L, 2);
    return 1;
  }
  lua_rawseti(L, -2, 1);
  for (int i = 0; i < nargs; i++) {
    lua_pushstring(L, args[i]);
    lua_rawseti(L, -2, i + 2);
  }
  lua_setglobal(L, "__weft_main");
  return report(W, dostring(W, "local t = __weft_main; __weft_main = nil\n"
                               "t[1](unpack(t, 2, table.maxn(t)))"));
}

static const char *info_code =
    "local weft = require 'weft'\n"
    "local i = weft.info()\n"
    "print(('weft     %s'):format(i.weft))\n"
    "print(('LuaJIT   %s'):format(i.luajit))\n"
    "print(('LLVM     %s'):format(i.llvm))\n"
    "print(('CPU      %s (%s)'):format(i.cpu, i.vector))\n"
    "print(('threads  %d'):format(i.threads))\n"
    "print(('CUDA     toolkit: %s; driver: %s'):format(i.cuda_toolkit, i.cuda_driver))\n"
    "print(('NVRTC    %s; kernels compile with --Ofast-compile=%s'):format(i.nvrtc,\n"
    "      tostring(i.cuda_fast_compile)))\n";

static void repl(weft_State *W) {
  lua_State *L = weft_lua(W);
  char line[4096];
  printf("weft %s (LuaJIT). Ctrl-D to exit.\n", weft_version());
  for (;;) {
    fputs("> ", stdout);
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) break;
    /* Try it as an expression first, so `> 1 + 2` prints 3. */
    lua_pushfstring(L, "return %s", line);
    const char *expr = lua_tostring(L, -1);
    int is_expr = luaL_loadbuffer(L, expr, strlen(expr), "=stdin") == 0;
    lua_pop(L, 1 + is_expr);
    if (is_expr) {
      lua_pushfstring(L, "print(%s)", line[0] == '=' ? line + 1 : line);
      report(W, dostring(W, lua_tostring(L, -1)));
      lua_pop(L, 1);
    } else {
      report(W, dostring(W, line));
    }
  }
  putchar('\n');
}

int main(int argc, char **argv) {
  if (argv[0] && argv[0][0]) progname = argv[0];
  int script = 0; /* index of the script in argv, 0 = none */
  const char *code = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-v") == 0 || strcmp(argv[i], "--version") == 0) {
      printf("weft %s\n", weft_version());
      return 0;
    } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      usage();
      return 0;
    } else if (strcmp(argv[i], "-e") == 0) {
      if (i + 1 >= argc) {
        usage();
        return 1;
      }
      code = argv[++i];
    } else if (strcmp(argv[i], "info") == 0 && !code) {
      code = info_code;
    } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
      fprintf(stderr, "%s: unknown option '%s'\n", progname, argv[i]);
      usage();
      return 1;
    } else {
      script = i;
      break;
    }
  }

  weft_State *W = weft_open();
  if (!W) {
    fprintf(stderr, "%s: cannot open the weft runtime\n", progname);
    return 1;
  }
  set_args(weft_lua(W), argc, argv, script ? script : argc - 1);
  int status = 0;
  if (code) status = report(W, dostring(W, code));
  if (status == 0 && script)
    status = run_script(W, argv[script], argc - script - 1, argv + script + 1);
  else if (status == 0 && !code) {
    if (isatty(0))
      repl(W);
    else
      status = run_script(W, "-", 0, NULL);
  }
  weft_close(W);
  /* stopped by Ctrl-C: the shell's convention for SIGINT, 128 + 2 */
  if (status == WEFT_ERRINTR) return 130;
  return status ? 1 : 0;
}
