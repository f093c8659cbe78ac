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
** Every chunk keeps its text (weft_dobuffer, weft_register_source), so
** kernels typed at the REPL, passed with -e or piped in compile.
**
** Ctrl-C while code runs stops it (weft_interrupt: kernels at their next
** loop back-edge, Lua at its next instruction) with "interrupted" and exit
** status 130 (at the REPL: back to the prompt); a second Ctrl-C before it
** has stopped ends the process. The script's os.exit is kept (the CLI does
** not sandbox it). A crash (SIGSEGV, SIGFPE, ...) prints a hint to rerun
** with WEFT_MODE=debug before the process dies of it.
**
** The REPL reads lines with GNU readline (line editing, history in
** ~/.weft_history) when libreadline can be loaded, else with plain stdio.
** Ctrl-C at its prompt drops what was typed and prompts again.
*/
#include <dlfcn.h>
#include <setjmp.h>
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

static void arm(weft_State *W) {
  interruptible = W;
  signal(SIGINT, on_sigint);
}

static void disarm(void) {
  signal(SIGINT, SIG_DFL);
  interruptible = NULL;
}

/* ---- crashes ---------------------------------------------------------- */

/* A fatal signal: say how to find the cause, then die of the signal (the
** handler was reset by SA_RESETHAND). Only write(2) is safe here. */
static void on_crash(int sig) {
  static const char hint[] =
      ": crashed. If it happened in a kernel, rerun with WEFT_MODE=debug: every array "
      "access and integer division is then checked and reported at its line.\n";
  const char *name = sig == SIGSEGV  ? "\nweft: SIGSEGV"
                     : sig == SIGBUS ? "\nweft: SIGBUS"
                     : sig == SIGFPE ? "\nweft: SIGFPE"
                     : sig == SIGILL ? "\nweft: SIGILL"
                                     : "\nweft: fatal signal";
  ssize_t r = write(2, name, strlen(name));
  r = write(2, hint, sizeof hint - 1);
  (void)r;
  raise(sig);
}

/* The crash hint on its own stack (a stack overflow leaves none). */
static void catch_crashes(void) {
  static char altstack[1 << 16];
  stack_t ss;
  memset(&ss, 0, sizeof ss);
  ss.ss_sp = altstack;
  ss.ss_size = sizeof altstack;
  sigaltstack(&ss, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_crash;
  sa.sa_flags = SA_RESETHAND | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
  for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++)
    sigaction(sigs[k], &sa, NULL);
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

/* All of a stream (malloc'd, *len bytes), NULL when out of memory. */
static char *read_all(FILE *f, size_t *len) {
  size_t cap = 1 << 14, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    char *nb = realloc(buf, cap * 2);
    if (!nb) free(buf);
    buf = nb;
    cap *= 2;
  }
  *len = n;
  return buf;
}

/* Run the chunk on top of the stack with args as `...`, Ctrl-C armed. */
static int run_chunk(weft_State *W, int nargs, char **args) {
  lua_State *L = weft_lua(W);
  for (int i = 0; i < nargs; i++)
    lua_pushstring(L, args[i]);
  arm(W);
  int st = weft_pcall(W, nargs, 0);
  disarm();
  return report(W, st);
}

/* Run a script file (or stdin when path is "-") with its arguments. */
static int run_script(weft_State *W, const char *path, int nargs, char **args) {
  lua_State *L = weft_lua(W);
  int st;
  if (strcmp(path, "-") == 0) {
    /* stdin keeps no text to read again: register it for its kernels */
    size_t len;
    char *text = read_all(stdin, &len);
    if (!text) {
      fprintf(stderr, "%s: out of memory reading stdin\n", progname);
      return 1;
    }
    st = weft_register_source(W, "=stdin", text, len);
    if (st == WEFT_OK) st = luaL_loadbuffer(L, text, len, "=stdin");
    free(text);
  } else {
    st = luaL_loadfile(L, path);
  }
  if (st != 0) {
    fprintf(stderr, "%s: %s\n", progname, st > 0 ? lua_tostring(L, -1) : weft_errmsg(W));
    if (st > 0) lua_pop(L, 1);
    return 1;
  }
  return run_chunk(W, nargs, args);
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

/* ---- the REPL ----------------------------------------------------------- */

/* Line input: GNU readline when it loads (dlopen: weft builds and starts
** without it), else stdio. */
typedef struct lineio {
  void *lib;
  char *(*readline)(const char *prompt);
  void (*add_history)(const char *line);
  int (*read_history)(const char *file);
  int (*write_history)(const char *file);
  void (*free_line_state)(void);
  void (*cleanup_after_signal)(void);
  char history[1024]; /* the history file, "" = none */
  int interrupted;    /* the last get_line ended with Ctrl-C */
} lineio;

/* Ctrl-C at a prompt drops the line and gives a fresh prompt. Reading
** with readline (told not to catch signals itself), the handler jumps out
** of it, and readline is cleaned up after; reading with stdio, the read
** just fails with EINTR. */
static sigjmp_buf prompt_jmp;
static volatile sig_atomic_t at_prompt; /* 0 no, 1 stdio, 2 readline */
static volatile sig_atomic_t prompt_intr;

static void on_prompt_sigint(int sig) {
  (void)sig;
  prompt_intr = 1;
  if (at_prompt == 2) {
    at_prompt = 0;
    siglongjmp(prompt_jmp, 1);
  }
}

/* Under AddressSanitizer, which refuses RTLD_DEEPBIND, the REPL reads
** plain lines (without DEEPBIND readline binds to LLVM's libedit). */
#if defined(__SANITIZE_ADDRESS__)
#define WF_CLI_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WF_CLI_ASAN 1
#endif
#endif
#ifndef WF_CLI_ASAN
#define WF_CLI_ASAN 0
#endif

static void lineio_open(lineio *io) {
  memset(io, 0, sizeof *io);
  if (WF_CLI_ASAN || getenv("WEFT_NO_READLINE")) return;
  io->lib = dlopen("libreadline.so.8", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!io->lib) io->lib = dlopen("libreadline.so", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!io->lib) return;
  *(void **)&io->readline = dlsym(io->lib, "readline");
  *(void **)&io->add_history = dlsym(io->lib, "add_history");
  *(void **)&io->read_history = dlsym(io->lib, "read_history");
  *(void **)&io->write_history = dlsym(io->lib, "write_history");
  *(void **)&io->free_line_state = dlsym(io->lib, "rl_free_line_state");
  *(void **)&io->cleanup_after_signal = dlsym(io->lib, "rl_cleanup_after_signal");
  int *catch_signals = dlsym(io->lib, "rl_catch_signals");
  if (catch_signals) *catch_signals = 0;
  if (!io->readline || !io->add_history) {
    dlclose(io->lib);
    memset(io, 0, sizeof *io);
    return;
  }
  const char *home = getenv("HOME");
  if (home && *home && io->read_history && io->write_history) {
    snprintf(io->history, sizeof io->history, "%s/.weft_history", home);
    io->read_history(io->history);
  }
}

static void lineio_close(lineio *io) {
  if (io->history[0]) io->write_history(io->history);
  /* readline stays loaded: it may have registered handlers until exit */
}

/* A line from stdin without its newline (malloc'd), NULL at its end or
** on Ctrl-C (prompt_intr set). */
static char *stdio_line(const char *prompt) {
  fputs(prompt, stdout);
  fflush(stdout);
  char *line = NULL;
  size_t cap = 0;
  ssize_t n = getline(&line, &cap, stdin);
  if (n < 0) {
    free(line);
    if (prompt_intr) clearerr(stdin);
    return NULL;
  }
  if (n > 0 && line[n - 1] == '\n') line[n - 1] = '\0';
  return line;
}

/* The next line without its newline (malloc'd), NULL at end of input;
** "" with io->interrupted set after a Ctrl-C. */
static char *get_line(lineio *io, const char *prompt) {
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_prompt_sigint; /* no SA_RESTART: the read stops */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old);
  prompt_intr = 0;
  char *line;
  if (sigsetjmp(prompt_jmp, 1)) { /* Ctrl-C inside readline */
    if (io->free_line_state) io->free_line_state();
    if (io->cleanup_after_signal) io->cleanup_after_signal();
    line = NULL;
  } else {
    at_prompt = io->readline ? 2 : 1;
    line = io->readline ? io->readline(prompt) : stdio_line(prompt);
    at_prompt = 0;
  }
  sigaction(SIGINT, &old, NULL);
  io->interrupted = prompt_intr && !line;
  if (io->interrupted) {
    fputs("\n", stdout);
    line = strdup("");
  }
  return line;
}

/* Is the syntax error on top an unfinished chunk ("... near '<eof>'")? */
static int at_eof(lua_State *L) {
  size_t n;
  const char *msg = lua_tolstring(L, -1, &n);
  const char *mark = "'<eof>'";
  size_t k = strlen(mark);
  return msg && n >= k && strcmp(msg + n - k, mark) == 0;
}

/* Load text as the next REPL chunk: as an expression to print if it is
** one, else as statements. Returns 0 with the function on top, 1 when the
** chunk is unfinished, -1 on a syntax error (reported). (The expression
** goes through select so that a call in it is no tail call: the chunk's
** frame stays, and errors point at its line.) */
static int load_entry(weft_State *W, const char *text) {
  lua_State *L = weft_lua(W);
  lua_pushfstring(L, "return select(1, %s\n)", text);
  size_t n;
  const char *expr = lua_tolstring(L, -1, &n);
  if (weft_register_source(W, "=stdin", expr, n) != WEFT_OK) {
    lua_pop(L, 1);
    return report(W, 1), -1;
  }
  int st = luaL_loadbuffer(L, expr, n, "=stdin");
  if (st == 0) {
    lua_remove(L, -2);
    return 0;
  }
  int expr_eof = at_eof(L);
  lua_pop(L, 2);
  if (weft_register_source(W, "=stdin", text, strlen(text)) != WEFT_OK) return report(W, 1), -1;
  st = luaL_loadbuffer(L, text, strlen(text), "=stdin");
  if (st == 0) return 0;
  if (at_eof(L) || expr_eof) {
    lua_pop(L, 1);
    return 1;
  }
  fprintf(stderr, "%s: %s\n", progname, lua_tostring(L, -1));
  lua_pop(L, 1);
  return -1;
}

/* Run the loaded entry on top; print what it returns. */
static void run_entry(weft_State *W) {
  lua_State *L = weft_lua(W);
  int base = lua_gettop(L) - 1;
  arm(W);
  int st = weft_pcall(W, 0, LUA_MULTRET);
  disarm();
  if (report(W, st) != WEFT_OK) return;
  int n = lua_gettop(L) - base;
  if (n > 0) {
    lua_getglobal(L, "print");
    lua_insert(L, base + 1);
    report(W, weft_pcall(W, n, 0));
  }
  lua_settop(L, base);
}

static void repl(weft_State *W) {
  lua_State *L = weft_lua(W);
  lineio io;
  lineio_open(&io);
  printf("weft %s (LuaJIT%s). Ctrl-D to exit; =expr prints.\n", weft_version(),
         io.readline ? ", readline" : "");
  for (;;) {
    char *line = get_line(&io, "> ");
    if (!line) break;
    if (!line[0]) {
      free(line);
      continue;
    }
    /* the chunk so far; "=expr" is "return expr" (as in luajit) */
    lua_pushstring(L, line[0] == '=' ? line + 1 : line);
    if (io.add_history) io.add_history(line);
    free(line);
    int st;
    while ((st = load_entry(W, lua_tostring(L, -1))) == 1) {
      char *more = get_line(&io, ">> ");
      if (!more) break;
      if (io.interrupted) { /* Ctrl-C drops the whole chunk */
        free(more);
        st = -1;
        break;
      }
      if (io.add_history && more[0]) io.add_history(more);
      lua_pushfstring(L, "%s\n%s", lua_tostring(L, -1), more);
      lua_remove(L, -2);
      free(more);
    }
    if (st == 0) {
      lua_remove(L, -2); /* the text */
      run_entry(W);
    } else {
      lua_pop(L, 1);
      if (st == 1) break; /* end of input inside a chunk */
    }
  }
  putchar('\n');
  lineio_close(&io);
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

  catch_crashes();
  char why[512];
  weft_Options opts;
  memset(&opts, 0, sizeof opts);
  opts.errbuf = why;
  opts.errbuf_size = sizeof why;
  weft_State *W = weft_open_ex(&opts);
  if (!W) {
    fprintf(stderr, "%s: cannot open the weft runtime: %s\n", progname, why);
    return 1;
  }
  set_args(weft_lua(W), argc, argv, script ? script : argc - 1);
  int status = 0;
  if (code) {
    arm(W);
    status = report(W, weft_dobuffer(W, code, strlen(code), "=(command line)"));
    disarm();
  }
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
