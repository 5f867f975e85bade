#include "model/tokenizer_corpus.hpp"

#include <string>

namespace brigade::model {
namespace {

// Plain prose first, then code in a few languages, so that common words, indentation and
// operators all earn merges.
constexpr char kProse[] = R"(The lighthouse keeper woke before the gulls. She climbed the
ninety-two steps of the tower, counted them out loud as she always did, and wiped the salt from
the great lens with a soft cloth. The sea was quiet that morning. A fishing boat with a red hull
was heading out past the rocks, and its engine coughed twice before it settled into a steady
rhythm. She wrote the time in the log: six fourteen, wind from the west, visibility good.

Nobody had asked her to keep the log for years. The light had been automatic since before her
daughter was born, and the engineers who came each spring only checked the batteries and left.
Still, she liked the habit. A record is a promise that someone, some day, will want to know what
happened here, and that the answer will be waiting for them.

When you build a system that many people depend on, you learn to think like that keeper. You
write things down. You measure what happens instead of guessing. You assume that every part can
fail, and you decide in advance what the rest of the system should do when it does. A queue that
can grow without bound is a failure that has not happened yet. A timeout that nobody chose is a
decision made by accident.

Good error messages say what went wrong and what to do about it. "The file could not be read"
is a start; "config.json is missing the field 'hidden_size': add it or regenerate the model" is
better. People read error messages at the worst moments of their week, so the message should do
as much of the thinking as it can.

Recipe for a simple bread: mix 500 grams of flour, 10 grams of salt, 7 grams of yeast and 350
millilitres of warm water. Knead for ten minutes until the dough is smooth. Let it rise for an
hour, shape it, let it rise again for forty minutes, then bake at 230 degrees for 35 minutes.
It's done when the bottom sounds hollow. Don't cut it while it's hot; you'll squash the crumb.

Questions people often ask: What's the difference between latency and throughput? Latency is how
long one request takes; throughput is how many requests finish per second. They're related but
they aren't the same, and improving one can hurt the other. Why does batching help? Because the
hardware does the same amount of work for a small batch as for a single item, up to a point.
Where does the time go? Measure it, don't guess. We've seen teams spend weeks on the wrong part.

Numbers appear everywhere: 1, 2, 3, 10, 42, 100, 256, 1024, 4096, 65536, 3.14159, 2.71828,
1,000,000 and 0.001. Dates like 2024-03-15 and times like 09:30:00. Versions like 1.2.3 and
v0.17.6. Prices like $19.99 and percentages like 96% or 4.5%.
)";

constexpr char kCode[] = R"(#include <cstdint>
#include <string>
#include <vector>

namespace example {

// Returns the sum of the values, or zero for an empty list.
int64_t sum(const std::vector<int64_t>& values) {
  int64_t total = 0;
  for (int64_t v : values) {
    total += v;
  }
  return total;
}

struct request {
  std::string prompt;
  int max_tokens = 16;
  float temperature = 1.0f;
};

class queue {
 public:
  explicit queue(std::size_t capacity) : capacity_(capacity) {}
  bool push(request r) {
    if (items_.size() >= capacity_) return false;
    items_.push_back(std::move(r));
    return true;
  }
  std::size_t size() const { return items_.size(); }

 private:
  std::size_t capacity_;
  std::vector<request> items_;
};

}  // namespace example

def tokenize(text, vocab):
    """Split text into known words, falling back to characters."""
    tokens = []
    for word in text.split():
        if word in vocab:
            tokens.append(vocab[word])
        else:
            tokens.extend(vocab.get(ch, 0) for ch in word)
    return tokens

class Counter:
    def __init__(self):
        self.counts = {}

    def add(self, key, amount=1):
        self.counts[key] = self.counts.get(key, 0) + amount
        return self.counts[key]

if __name__ == "__main__":
    c = Counter()
    for name in ["alpha", "beta", "alpha"]:
        print(name, c.add(name))

function fetchJson(url, options = {}) {
  return fetch(url, options).then((response) => {
    if (!response.ok) {
      throw new Error(`request failed: ${response.status}`);
    }
    return response.json();
  });
}

const config = { "model": "tiny", "layers": 2, "experts": 8, "top_k": 2 };
for (let i = 0; i < config.layers; i++) {
  console.log(`layer ${i} has ${config.experts} experts`);
}

SELECT name, count(*) AS requests FROM log WHERE status = 200 GROUP BY name ORDER BY requests DESC;
$ cmake -S . -B build -G Ninja && cmake --build build -j2
)";

}  // namespace

std::string_view tokenizer_corpus() {
  static const std::string corpus = std::string(kProse) + "\n" + kCode;
  return corpus;
}

}  // namespace brigade::model
