// A header-heavy C++ translation unit: the standard library's containers, streams, regex
// and algorithms instantiated over several types, to make g++ allocate a lot.
#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <numeric>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <variant>
#include <vector>

template <typename Key, typename Value>
std::map<Key, std::vector<Value>> group(const std::vector<std::pair<Key, Value>> &pairs) {
    std::map<Key, std::vector<Value>> groups;
    for (const auto &[key, value] : pairs) groups[key].push_back(value);
    return groups;
}

template <typename T>
std::string describe(const std::vector<T> &values) {
    std::ostringstream out;
    for (const auto &value : values) out << value << ',';
    return out.str();
}

using Cell = std::variant<int, double, std::string>;

int main(int argc, char **argv) {
    std::vector<std::string> words(argv, argv + argc);
    std::regex pattern("([a-z]+)=([0-9]+)");
    std::unordered_map<std::string, int> counts;
    for (const auto &word : words) {
        std::smatch match;
        if (std::regex_match(word, match, pattern)) counts[match[1]] += std::stoi(match[2]);
    }
    std::vector<std::pair<int, std::string>> pairs;
    std::vector<std::pair<std::string, double>> scores;
    for (const auto &[word, count] : counts) {
        pairs.emplace_back(count, word);
        scores.emplace_back(word, count * 0.5);
    }
    auto by_count = group(pairs);
    auto by_word = group(scores);
    std::set<std::tuple<int, std::string, double>> ordered;
    for (const auto &[count, names] : by_count) ordered.emplace(count, describe(names), 0.0);
    std::vector<Cell> cells{1, 2.5, std::string("three")};
    std::vector<std::unique_ptr<std::function<int(int)>>> functions;
    functions.push_back(std::make_unique<std::function<int(int)>>([](int x) { return x * 2; }));
    int total = std::accumulate(pairs.begin(), pairs.end(), 0,
                                [](int sum, const auto &pair) { return sum + pair.first; });
    std::sort(pairs.begin(), pairs.end());
    for (const auto &cell : cells)
        std::visit([](const auto &value) { std::cout << value << '\n'; }, cell);
    std::cout << total << ' ' << by_word.size() << ' ' << ordered.size() << ' '
              << (*functions[0])(total) << '\n';
    return 0;
}
