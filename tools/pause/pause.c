// The sandbox ("pause") container of the real-node test bed: holds a pod's namespaces open and
// does nothing else. Exits 0 on SIGINT or SIGTERM, reaps children it inherits as PID 1.
// Built statically by scripts/build-image.sh into build/image/pause.tar.
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t stop = 0;

static void on_stop(int sig) { (void)sig; stop = 1; }

static void on_child(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    puts("gpuheal-pause");
    return 0;
  }
  if (getpid() != 1) fputs("pause: not PID 1 (expected inside a pod sandbox)\n", stderr);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sa.sa_handler = on_child;
  sa.sa_flags = SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, NULL);
  while (!stop) pause();
  return 0;
}
