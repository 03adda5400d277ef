#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace rl {

// "512MiB", "1.5GiB", "64KB", "1000" (bytes). Binary (KiB, MiB, GiB, TiB) and decimal (KB, MB,
// GB, TB) units, case-insensitive, optional 'B'. Throws rl::Error naming the text on a malformed
// or overflowing size.
uint64_t parse_bytes(std::string_view text);
// "1.50 MiB" (binary units, 3 significant digits), "512 B".
std::string format_bytes(uint64_t bytes);

}  // namespace rl
