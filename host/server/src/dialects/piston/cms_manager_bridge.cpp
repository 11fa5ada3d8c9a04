// progscore's bridge from CMS's Communication protocol to an interactor's
// (testlib's conventions). The task's manager runs as CMS runs it: its stdin
// the test's input, the user's two pipes as paths in argv (from the user,
// to the user), its score on stdout and its message on stderr. This
// bridge's own stdin and stdout are the conversation with the program; at
// the end it says the score as testlib does (exit 0 full, 1 none, 7 and
// `points X` between), or FAIL (exit 3) when the manager failed.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#define main progscore_cms_manager_main
#include "manager.cpp"
#undef main

static std::string slurp(const char* path) {
    std::string text;
    if (FILE* file = std::fopen(path, "r")) {
        char buffer[4096];
        size_t read;
        while ((read = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, read);
        std::fclose(file);
    }
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
    return text;
}

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "FAIL the bridge needs INPUT as its first argument\n");
        return 3;
    }
    // A program that left must not kill the manager's writes.
    std::signal(SIGPIPE, SIG_IGN);
    const char* score_path = "/tmp/progscore-manager-score";
    const char* message_path = "/tmp/progscore-manager-message";
    pid_t manager = fork();
    if (manager < 0) {
        std::fprintf(stderr, "FAIL cannot start the manager: %s\n", std::strerror(errno));
        return 3;
    }
    if (manager == 0) {
        // The conversation becomes the manager's two pipes (fds 3 and 4,
        // taken before any file is opened there); its stdin the input.
        if (dup2(0, 3) < 0 || dup2(1, 4) < 0) _exit(120);
        int input = open(argv[1], O_RDONLY);
        int score = open(score_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int message = open(message_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (input < 0 || score < 0 || message < 0 || dup2(input, 0) < 0 || dup2(score, 1) < 0 ||
            dup2(message, 2) < 0) {
            _exit(120);
        }
        static char name[] = "manager", from_user[] = "/dev/fd/3", to_user[] = "/dev/fd/4";
        char* args[] = {name, from_user, to_user, nullptr};
        std::exit(progscore_cms_manager_main(3, args));
    }
    // The manager holds the conversation now.
    close(0);
    close(1);
    int status = 0;
    while (waitpid(manager, &status, 0) < 0 && errno == EINTR) {
    }
    std::string message = slurp(message_path);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "FAIL the manager ended with %s %d: %s\n",
                     WIFEXITED(status) ? "code" : "signal",
                     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), message.c_str());
        return 3;
    }
    std::string score_text = slurp(score_path);
    char* end = nullptr;
    double score = std::strtod(score_text.c_str(), &end);
    if (score_text.empty() || end == nullptr || (*end != '\0' && *end != '\n' && *end != ' ') ||
        !(score >= 0.0 && score <= 1.0)) {
        std::fprintf(stderr, "FAIL the manager printed %s, not a score in [0, 1]: %s\n",
                     score_text.c_str(), message.c_str());
        return 3;
    }
    if (score >= 1.0) {
        std::fprintf(stderr, "ok %s\n", message.c_str());
        return 0;
    }
    if (score <= 0.0) {
        std::fprintf(stderr, "wrong answer %s\n", message.c_str());
        return 1;
    }
    std::fprintf(stderr, "points %.6f %s\n", score, message.c_str());
    return 7;
}
