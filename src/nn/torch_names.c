/* src/nn/torch_names.c: the names PyTorch gives the built-in models'
 * tensors (Note [PyTorch names]), for checkpoints that load_state_dict
 * reads and that kiln reads back from PyTorch. */
#include <stdio.h>
#include <string.h>

#include "nn.h"

/* Note [PyTorch names]: the PyTorch module equivalent to each built-in
 * model, and the prefix of each kiln layer in its state_dict:
 *   mlp:  nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256),
 *         nn.ReLU(), nn.Linear(256, 10)) on x.flatten(1):
 *         fc1 -> 0, fc2 -> 2, fc3 -> 4
 *   cnn:  nn.Sequential(nn.Conv2d(1, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
 *         nn.Conv2d(16, 32, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
 *         nn.Linear(512, 128), nn.ReLU(), nn.Linear(128, 10)):
 *         conv1 -> 0, conv2 -> 3, fc1 -> 7, fc2 -> 9
 *   lstm: a module with lstm = nn.LSTM(28, 128, batch_first=True) and
 *         fc = nn.Linear(128, 10), called as fc(lstm(x.view(-1, 28, 28))[0][:, -1]):
 *         the names are kiln's own (lstm.weight_ih_l0, ..., fc.weight).
 * scripts/torch_checkpoint.py builds these modules and checks the mapping
 * against PyTorch. */
static const struct {
  const char *arch, *kiln, *torch;
} MAP[] = {
    {"mlp", "fc1", "0"},   {"mlp", "fc2", "2"},   {"mlp", "fc3", "4"},
    {"cnn", "conv1", "0"}, {"cnn", "conv2", "3"}, {"cnn", "fc1", "7"}, {"cnn", "fc2", "9"},
};

const char *nn_torch_name(const char *arch, const char *name, char *buf, size_t n) {
  const char *dot = strchr(name, '.');
  size_t k = dot ? (size_t)(dot - name) : strlen(name);
  for (size_t i = 0; arch && i < sizeof MAP / sizeof *MAP; i++)
    if (strcmp(MAP[i].arch, arch) == 0 && strlen(MAP[i].kiln) == k &&
        strncmp(MAP[i].kiln, name, k) == 0) {
      snprintf(buf, n, "%s%s", MAP[i].torch, name + k);
      return buf;
    }
  snprintf(buf, n, "%s", name);
  return buf;
}
