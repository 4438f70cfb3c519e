// spank_fleet: adds --fleet=SPEC.yaml to sbatch, salloc and srun (and so `#SBATCH --fleet=`).
//
// In the submitting command (allocator or local context) it reads the FLEET request file and
// puts its text in the job's control environment, which Slurm hands to PrologSlurmctld and
// EpilogSlurmctld as SPANK_FLEET_SPEC (and the file's path as SPANK_FLEET_SPEC_FILE). The
// file is read at submission because it lives where the user submits, not on the controller;
// a missing, unreadable, empty or too large file makes the command fail before anything is
// submitted. The controller side (fleet-prolog-slurmctld) does the rest.
//
// plugstack.conf:  optional /usr/lib/slurm/spank_fleet.so [max_size=BYTES]
//
// Build: gcc -shared -fPIC -o spank_fleet.so spank_fleet.c (needs libslurm-dev's spank.h; the
// symbols come from the Slurm program that loads it).

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <slurm/spank.h>

// The macro ends with its own semicolon.
SPANK_PLUGIN(fleet, 1)

// The default cap on a spec's size. The text travels in every copy of the job record, so a
// runaway file (a model checkpoint given by mistake) must not get that far.
#define FLEET_DEFAULT_MAX_SIZE (64 * 1024)
// The largest max_size= plugstack.conf may give. The text reaches PrologSlurmctld as one
// environment string, "SPANK_FLEET_SPEC=" + text, and Linux refuses to exec a program with a
// string over MAX_ARG_STRLEN (32 pages, 128 KiB) with E2BIG: slurmctld could not start the
// prolog at all. 32 bytes are kept for the name and the NUL.
#define FLEET_HARD_MAX_SIZE (128 * 1024 - 32)

static size_t max_size = FLEET_DEFAULT_MAX_SIZE;
static char* spec_text = NULL;  // The file's contents once read; NULL: no --fleet.
static char spec_path[PATH_MAX];
static int remote_fleet_job = 0;  // In slurmstepd: the job was submitted with --fleet.

// True in a command that creates a job (sbatch, salloc, or srun outside any allocation). An
// srun inside a job sees the option again (Slurm passes the job's SPANK options on in its
// environment), but its job already has its fabric, and the file may not be readable there.
static int CreatesJob(void) {
  spank_context_t context = spank_context();
  if (context == S_CTX_ALLOCATOR) return 1;
  return context == S_CTX_LOCAL && getenv("SLURM_JOB_ID") == NULL;
}

// Reads `path` whole into a new NUL-terminated buffer. On failure logs why, naming the file
// and the rule, and returns NULL.
static char* ReadSpec(const char* path) {
  // O_NONBLOCK: opening a FIFO (or a device) must not block sbatch; only regular files pass.
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    slurm_error(
        "--fleet: cannot open FLEET spec '%s': %s (give a readable YAML request "
        "file, read when the job is submitted)",
        path, strerror(errno));
    return NULL;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    slurm_error("--fleet: FLEET spec '%s' is not a regular file", path);
    close(fd);
    return NULL;
  }
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  FILE* file = fdopen(fd, "r");
  if (file == NULL) {
    slurm_error("--fleet: cannot read FLEET spec '%s': %s", path, strerror(errno));
    close(fd);
    return NULL;
  }
  // Read one byte past the cap so that a file that grew since fstat is caught too.
  char* text = malloc(max_size + 2);
  if (text == NULL) {
    slurm_error("--fleet: out of memory reading '%s'", path);
    fclose(file);
    return NULL;
  }
  size_t size = fread(text, 1, max_size + 1, file);
  int read_error = ferror(file);
  fclose(file);
  if (read_error) {
    slurm_error("--fleet: cannot read FLEET spec '%s'", path);
    free(text);
    return NULL;
  }
  if (size > max_size) {
    slurm_error("--fleet: FLEET spec '%s' is %lld bytes; it may be at most %zu bytes", path,
                (long long)(st.st_size > (off_t)size ? st.st_size : (off_t)size), max_size);
    free(text);
    return NULL;
  }
  if (size == 0) {
    slurm_error("--fleet: FLEET spec '%s' is empty; it must hold a topology request", path);
    free(text);
    return NULL;
  }
  if (memchr(text, '\0', size) != NULL) {
    slurm_error("--fleet: FLEET spec '%s' holds a NUL byte; it must be YAML text", path);
    free(text);
    return NULL;
  }
  text[size] = '\0';
  return text;
}

static int OnFleetOption(int val, const char* optarg, int remote) {
  (void)val;
  if (remote) {
    remote_fleet_job = 1;
    return 0;
  }
  if (!CreatesJob()) return 0;
  if (optarg == NULL || optarg[0] == '\0') {
    slurm_error("--fleet: needs the path of a FLEET request file, e.g. --fleet=ring.yaml");
    return -1;
  }
  // sbatch reads its options more than once (command line, #SBATCH lines, command line
  // again); the last one wins.
  char* text = ReadSpec(optarg);
  if (text == NULL) return -1;
  free(spec_text);
  spec_text = text;
  // The absolute path, so that the controller's messages name the file the user knows.
  if (optarg[0] == '/' || getcwd(spec_path, sizeof(spec_path)) == NULL ||
      strlen(spec_path) + 1 + strlen(optarg) >= sizeof(spec_path)) {
    snprintf(spec_path, sizeof(spec_path), "%s", optarg);
  } else {
    strcat(spec_path, "/");
    strcat(spec_path, optarg);
  }
  return 0;
}

static struct spank_option fleet_option = {
    "fleet",
    "SPEC.yaml",
    "Request a FLEET optical topology for the job from the request file SPEC.yaml (see "
    "deploy/slurm/README.md); the job starts once it is ready, with FLEET_ALLOCATION and "
    "FLEET_RANKS in its environment.",
    1,
    0,
    OnFleetOption};

static int ParseArgs(int ac, char** av) {
  for (int i = 0; i < ac; ++i) {
    if (strncmp(av[i], "max_size=", 9) == 0) {
      char* end = NULL;
      errno = 0;
      unsigned long long value = strtoull(av[i] + 9, &end, 10);
      if (errno != 0 || end == av[i] + 9 || *end != '\0' || value == 0 ||
          value > FLEET_HARD_MAX_SIZE) {
        slurm_error(
            "spank_fleet: plugstack.conf argument '%s': max_size must be a byte count "
            "from 1 to %d",
            av[i], FLEET_HARD_MAX_SIZE);
        return -1;
      }
      max_size = (size_t)value;
    } else {
      slurm_error("spank_fleet: unknown plugstack.conf argument '%s' (known: max_size=BYTES)",
                  av[i]);
      return -1;
    }
  }
  return 0;
}

int slurm_spank_init(spank_t sp, int ac, char** av) {
  if (ParseArgs(ac, av) != 0) return -1;
  // Registered wherever Slurm accepts it, so that slurmstepd knows the option srun forwards.
  spank_context_t context = spank_context();
  if (context == S_CTX_LOCAL || context == S_CTX_ALLOCATOR || context == S_CTX_REMOTE) {
    if (spank_option_register(sp, &fleet_option) != ESPANK_SUCCESS) {
      slurm_error("spank_fleet: cannot register --fleet");
      return -1;
    }
  }
  return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char** av) {
  (void)ac;
  (void)av;
  if (spec_text == NULL || !CreatesJob()) return 0;
  spank_err_t err = spank_job_control_setenv(sp, "FLEET_SPEC", spec_text, 1);
  if (err == ESPANK_SUCCESS) {
    err = spank_job_control_setenv(sp, "FLEET_SPEC_FILE", spec_path, 1);
  }
  if (err != ESPANK_SUCCESS) {
    slurm_error("--fleet: cannot pass FLEET spec '%s' to the controller: %s", spec_path,
                spank_strerror(err));
    return -1;
  }
  return 0;
}

// In slurmstepd, before the tasks start: marks the tasks of a --fleet job, so that the
// TaskProlog (fleet-task-prolog) looks up the allocation for them and for nobody else. The
// job's control environment, which would tell it too, reaches the tasks of sbatch and salloc
// jobs but not those of an srun that made its own job.
int slurm_spank_user_init(spank_t sp, int ac, char** av) {
  (void)ac;
  (void)av;
  if (!remote_fleet_job) return 0;
  if (spank_setenv(sp, "FLEET_SPANK", "1", 1) != ESPANK_SUCCESS) {
    slurm_error("spank_fleet: cannot mark the job's tasks with FLEET_SPANK=1");
  }
  return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char** av) {
  (void)sp;
  (void)ac;
  (void)av;
  free(spec_text);
  spec_text = NULL;
  return 0;
}
