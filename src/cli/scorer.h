/* A model ready to score: the run's saved experiment and one checkpoint (or an export) loaded into a model built
 * for batches up to a maximum, and the one inference path `predict` and `serve` share: dense rows, LibSVM lines
 * and feature columns as the run's data readers make them, probabilities as the model's softmax (or sigmoid).
 *
 * Lazy tables of a run's checkpoint are never loaded whole: their rows are read from the checkpoint's row files in
 * place (store/rowindex.h) for each batch, and a row the checkpoint does not hold reads as the ps would make it (the
 * variable's initializer, seeded as the run's). An export holds its tables whole.
 *
 * Ownership: the caller owns a scorer (tfx_scorer_close). Thread-safety: one thread uses a scorer at a time (its
 * model's step buffers). Errors: those of the config, weights and model readers (TFX_ENOTFOUND, TFX_ECORRUPT,
 * TFX_ESHAPE naming the file or variable), TFX_EINVAL for an input the model cannot score (an id outside a table). */
#ifndef TFX_CLI_SCORER_H
#define TFX_CLI_SCORER_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "data/dataset.h"

typedef struct tfx_scorer tfx_scorer;

/* Loads run_dir's saved experiment and its checkpoint ckpt_dir (NULL or "": the newest usable one); caller owns
 * *out; close with tfx_scorer_close. */
int tfx_scorer_open_run(const char *run_dir, const char *ckpt_dir, int max_batch, tfx_scorer **out, tfx_err *err);
/* Loads an export directory (model.json, model.safetensors); caller owns *out; close with tfx_scorer_close. */
int tfx_scorer_open_export(const char *dir, int max_batch, tfx_scorer **out, tfx_err *err);
/* The experiment the model was built from (borrowed from s). */
const tfx_config *tfx_scorer_config(const tfx_scorer *s);
/* The step of the weights, and where they came from (borrowed). */
int64_t tfx_scorer_step(const tfx_scorer *s);
const char *tfx_scorer_source(const tfx_scorer *s);
/* Floats a dense example holds, classes a prediction holds, and the largest batch tfx_scorer_run takes. */
size_t tfx_scorer_inputs(const tfx_scorer *s);
size_t tfx_scorer_classes(const tfx_scorer *s);
int tfx_scorer_max_batch(const tfx_scorer *s);
/* Rows of lazy tables indexed and the index's bytes (0 without lazy tables). */
size_t tfx_scorer_lazy_rows(const tfx_scorer *s);
size_t tfx_scorer_lazy_bytes(const tfx_scorer *s);
/* The probabilities of examples [i, i + b) of d (b <= the max batch) into probs [b, classes]. The model runs on
 * blocks of a fixed size (8 rows, the last padded with empty ones), so an example's probabilities are the same bits
 * whatever examples come with it and wherever it sits: OpenBLAS's sgemm rounds a row by the batch's size and the
 * row's place (its tail kernels), and a served request is batched with whatever else arrived; predict and serve
 * thus agree bit for bit. TFX_EINVAL for an embedding id outside its table, its position in the batch in *at. */
int tfx_scorer_run(tfx_scorer *s, const tfx_dataset *d, size_t i, int b, float *probs, int *at, tfx_err *err);
/* Raw dense values (pixels, numbers as the files hold them) scaled in place as training scales them:
 * (float)(x * data.scale), then normalized by data.mean and data.std. */
void tfx_scorer_scale(const tfx_config *cfg, float *x, size_t n);
/* Frees the scorer; NULL does nothing. */
void tfx_scorer_close(tfx_scorer *s);

#endif
