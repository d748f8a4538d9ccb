// Subcommands of the `lathe` CLI. Each register_* adds its subcommand (flags, help, callback) to
// the app; the callback sets the process exit code through *exit_code.
#pragma once

namespace CLI {
class App;
}

namespace lathe::cli {

void register_generate(CLI::App& app, int* exit_code);
void register_inspect(CLI::App& app, int* exit_code);
void register_serve(CLI::App& app, int* exit_code);
void register_bench(CLI::App& app, int* exit_code);
void register_quantize(CLI::App& app, int* exit_code);
void register_eval(CLI::App& app, int* exit_code);
// `lathe bench serve` (cmd_bench_serve.cpp), added under `bench` by register_bench().
void register_bench_serve(CLI::App& bench, int* exit_code);

}  // namespace lathe::cli
