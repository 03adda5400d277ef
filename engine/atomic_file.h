#pragma once
// Files are written to a temporary name beside their destination and renamed into place, so a
// reader never sees half a file and a failed write leaves nothing behind.
#include <string>
#include <string_view>

namespace rl {

// Writes the concatenation of `parts`. Throws rl::Error naming `path`, what failed, and what to
// do, after removing the temporary file.
void write_file_atomically(const std::string& path, std::initializer_list<std::string_view> parts);

}  // namespace rl
