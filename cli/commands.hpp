// The subcommands of the `brigade` program. Each lives in its own cli/cmd_*.cpp and parses its
// own arguments; main() only dispatches on the first word.
#pragma once

namespace brigade::cli {

/// Signature of every subcommand: the arguments after the subcommand name, argv[0] included.
using command_fn = int (*)(int argc, char** argv);

int make_model(int argc, char** argv);
int generate(int argc, char** argv);
int bench(int argc, char** argv);
int run_default(int argc, char** argv);
int serve(int argc, char** argv);
int plan_experts(int argc, char** argv);
int replay(int argc, char** argv);
int node(int argc, char** argv);
int chaos(int argc, char** argv);
int deploy(int argc, char** argv);
int top(int argc, char** argv);
int tokenize(int argc, char** argv);
int detokenize(int argc, char** argv);

}  // namespace brigade::cli
