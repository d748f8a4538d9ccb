// lathe: the command-line tool. Subcommands live in cmd_*.cpp and register themselves here.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "app/commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "Lathe: a workbench for LLM inference. Inspect, run, serve, benchmark, quantize and evaluate "
      "Llama-family models\n"
      "(GGUF files and Hugging Face folders) on the CPU or NVIDIA GPUs."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("lathe ") + LATHE_VERSION);
  int exit_code = 0;
  lathe::cli::register_generate(app, &exit_code);
  lathe::cli::register_inspect(app, &exit_code);
  lathe::cli::register_serve(app, &exit_code);
  lathe::cli::register_bench(app, &exit_code);
  lathe::cli::register_quantize(app, &exit_code);
  lathe::cli::register_eval(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
