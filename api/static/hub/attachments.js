// Files chosen to go with a message, as n8n's Chat Hub sends them: inline in the JSON body,
// {fileName, mimeType, data} with the data base64 (here as a data: URL, which the server takes).

export function readFile(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve({
      fileName: file.name,
      mimeType: file.type || "application/octet-stream",
      data: String(reader.result),
    });
    reader.onerror = () => reject(new Error(`${file.name} could not be read.`));
    reader.readAsDataURL(file);
  });
}

// The file picker's `accept`, from the agent's allowedFilesMimeTypes ("" or "*/*": any).
export function acceptOf(metadata) {
  const types = String(metadata?.allowedFilesMimeTypes || "").trim();
  return types === "*" || types === "*/*" ? "" : types;
}

export function acceptsFiles(metadata) {
  return Boolean(metadata?.allowFileUploads);
}
